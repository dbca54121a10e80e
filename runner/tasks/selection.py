"""`cu-run tasks select`: a study's task list, drawn by a rule published before any agent ran.

The rule: sort the suite's task ids, shuffle them with Python's random.Random(seed), walk
that order, keep a task only when a no-agent baseline completes its setup and verification
and scores 0, stop at COUNT. The draw is written to selection.yaml with the seed, the rule
and a hash of every task, so the same inputs give the same file, and a run given the file
refuses it, naming the tasks, when the suite changed since the draw: nobody can quietly
redraw it afterwards.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from runner.errors import UsageError
from runner.tasks.model import Suite, TagFilter, Task

RULE = ("sort the task ids; shuffle them with Python's random.Random(seed); walk that order, "
        "keeping a task only when the baseline agent completes its setup and verification and scores 0 "
        "(with no baseline: every task); stop at count")

# The baseline's outcome for each task id it ran: (outcome, reason), as in results.jsonl.
Baseline = Callable[[list[str]], dict[str, tuple[str, str]]]


@dataclass(frozen=True)
class Exclusions:
    ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    include: tuple[tuple[str, ...], ...] = ()  # --tags: a task must have one tag of each group

    def admits(self, task: Task) -> bool:
        return task.id not in self.ids and TagFilter(self.include, self.tags).matches(task)


# Why a task the walk reaches cannot be tried at all (it cannot run here, its assets are
# missing), or None: such a task is skipped with that reason, and the walk goes on.
Precheck = Callable[[Task], str | None]


def offline_baseline(task: Task) -> str | None:
    """Why the walk's baseline cannot try TASK: its network reaches sites on the internet, and the
    baseline runs without one (no recording to replay). Its own services are no reason."""
    network = task.spec.network
    if network is not None and network.allow:
        return "its network reaches sites on the internet, and the walk's baseline runs offline"
    return None


def first_reason(*checks: Precheck) -> Precheck:
    """One precheck: the first reason any of CHECKS gives."""
    return lambda task: next((why for check in checks if (why := check(task)) is not None), None)


@dataclass
class Selection:
    seed: int
    count: int
    suite: str
    suite_hash: str
    task_hashes: dict[str, str]
    tasks: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {id, reason}
    baseline: str | None = None
    baseline_run: str | None = None  # the baseline's run folder, relative to the selection file
    excluded: dict = field(default_factory=dict)

    def as_yaml(self) -> str:
        data = {"rule": RULE, "seed": self.seed, "count": self.count, "suite": self.suite,
                "suite_hash": self.suite_hash, "baseline": self.baseline, "baseline_run": self.baseline_run,
                "excluded": self.excluded, "tasks": self.tasks, "skipped": self.skipped,
                "task_hashes": self.task_hashes}
        return yaml.safe_dump(data, sort_keys=False, width=100)


def walk_order(ids: list[str], seed: int) -> list[str]:
    order = sorted(ids)
    random.Random(seed).shuffle(order)
    return order


def draw(suite: Suite, seed: int, count: int, exclusions: Exclusions, baseline: Baseline | None,
         batch: int = 1, baseline_name: str | None = None, precheck: Precheck | None = None) -> Selection:
    """Walks the shuffled order, asking BASELINE about BATCH tasks at a time (a VM pool's worth),
    until COUNT are kept or the order ends. A task that cannot run here (its `excluded` reasons)
    or that PRECHECK refuses is skipped, with why, without a baseline."""
    if count < 1:
        raise UsageError("--count must be at least 1")
    unknown = sorted(set(exclusions.ids) - {t.id for t in suite.tasks})
    if unknown:
        raise UsageError(f"--exclude-ids names tasks suite {suite.name} does not have: {', '.join(unknown)}")
    candidates = [t.id for t in suite.tasks if exclusions.admits(t)]
    by_id = {t.id: t for t in suite.tasks}
    excluded: dict = {"ids": sorted(exclusions.ids), "tags": sorted(exclusions.tags)}
    if exclusions.include:
        excluded["unless_tagged"] = [list(group) for group in exclusions.include]
    selection = Selection(seed, count, suite.name, suite.content_hash(), suite.task_hashes(),
                          baseline=baseline_name if baseline else None, excluded=excluded)
    order = walk_order(candidates, seed)
    at = 0
    while len(selection.tasks) < count and at < len(order):
        step = max(batch, count - len(selection.tasks))
        chunk: list[str] = []
        refused: dict[str, str] = {}
        while at < len(order) and len(chunk) < step:
            task = by_id[order[at]]
            at += 1
            why = "; ".join(task.spec.excluded) or (precheck(task) if precheck else None)
            if why:
                refused[task.id] = f"cannot be tried here: {why}"
            chunk.append(task.id)
        tried = [t for t in chunk if t not in refused]
        verdicts = baseline(tried) if baseline and tried else {}
        for task_id in chunk:
            if len(selection.tasks) == count:
                break  # the walk stops at COUNT: later tasks of the chunk were never reached
            reason = refused.get(task_id) or (_why_not(verdicts.get(task_id)) if baseline else None)
            if reason is None:
                selection.tasks.append(task_id)
            else:
                selection.skipped.append({"id": task_id, "reason": reason})
    return selection


def _why_not(verdict: tuple[str, str] | None) -> str | None:
    """Why a task fails the baseline test, or None when the baseline completed and scored 0."""
    if verdict is None:
        return "the baseline left no result"
    outcome, reason = verdict
    if outcome == "fail":
        return None
    if outcome == "pass":
        return "the baseline passed it: the task is solved by doing nothing"
    if outcome == "verifier_error":
        return f"its verification did not complete under the baseline: {reason}"
    if outcome == "infra_error":
        return f"its setup did not complete under the baseline: {reason}"
    return f"the baseline ended {outcome}: {reason}"


def load_selection(path: Path, suite: Suite) -> list[str]:
    """The task ids of the selection at PATH, refused when SUITE is not the suite it was drawn from."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"cannot read the selection {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or "task_hashes" not in data:
        raise UsageError(f"{path} is not a selection (no tasks and task_hashes)",
                         fix="draw one: cu-run tasks select --suite S --seed N --count K --out FILE")
    if data.get("suite_hash") != suite.content_hash():
        raise UsageError(f"suite {suite.name} changed since the selection {path} was drawn: "
                         + "; ".join(differences(data["task_hashes"], suite.task_hashes())),
                         fix="run the tasks as they were drawn (restore the suite), or draw a new selection "
                             "and publish it before any run")
    return [str(t) for t in data["tasks"]]


def differences(then: dict[str, str], now: dict[str, str]) -> list[str]:
    changed = sorted(t for t in then if t in now and then[t] != now[t])
    gone = sorted(set(then) - set(now))
    added = sorted(set(now) - set(then))
    parts = [f"changed: {', '.join(changed)}"] if changed else []
    parts += [f"removed: {', '.join(gone)}"] if gone else []
    parts += [f"added: {', '.join(added)}"] if added else []
    return parts or ["the suite's shared files (safety.yaml) changed"]


def baseline_runner(run: Callable[[tuple[str, ...]], list]) -> Baseline:
    """A Baseline over RUN, which runs the baseline agent on some task ids and returns their
    records (runner.runs.run.run_suite, in one run folder resumed batch after batch)."""

    def ask(task_ids: list[str]) -> dict[str, tuple[str, str]]:
        records = run(tuple(task_ids))
        return {r.task_id: (r.outcome, r.reason) for r in records if r.task_id in task_ids and r.trial == 1}

    return ask
