"""Whether a run may be resumed by this request: the same agent, image, tasks and episode options.

`run --resume` appends episodes under the run.json the run began with. Episodes of another agent,
image or task list would then be summed, reported, compared and exported as if one run had made
them all, so every difference is named and the resume refused.
"""

from __future__ import annotations

from typing import Any

from runner.runs.request import RUN_OPTIONS

# The options that change what an episode is, or how many there are (the table's `kept` column).
# Where a run goes (pool, cluster, accelerator, warm or cold start) and how it is watched (live,
# record) may change.
EPISODE_ARGUMENTS = tuple(row.name for row in RUN_OPTIONS if row.kept)


def resume_differences(previous: dict, arguments: dict[str, Any], agent: str, image_sha256: str,
                       task_ids: list[str]) -> list[str]:
    """What differs between the run.json PREVIOUS and this run, whose run.json "arguments" are
    ARGUMENTS (RunRequest.arguments): one line each, none when none."""
    found = []
    before_agent = previous.get("agent", {}).get("name")
    if before_agent != agent:
        found.append(f"agent: {before_agent} then, {agent} now")
    before_image = previous.get("image", {}).get("sha256", "")
    if before_image != image_sha256:
        found.append(f"image: sha256 {before_image[:16]}... then, {image_sha256[:16]}... now")
    before_tasks = previous.get("suite", {}).get("tasks")
    if before_tasks != task_ids and not arguments["adds_tasks"]:
        found.append(f"tasks: {_short(before_tasks)} then, {_short(task_ids)} now")
    before = previous.get("arguments", {})
    for name in EPISODE_ARGUMENTS:
        then, now = before.get(name), arguments[name]
        if name in before and then != now:
            found.append(f"--{name.replace('_', '-')}: {then!r} then, {now!r} now")
    return found


def _short(ids: list[str] | None) -> str:
    if ids is None:
        return "unknown"
    return ",".join(ids) if len(ids) <= 6 else f"{len(ids)} tasks ({','.join(ids[:3])}, ...)"
