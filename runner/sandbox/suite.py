"""cu-run suites as Inspect tasks: `inspect eval cu_run/suite -T suite=linux-core --model ...`.

Each cu-run task is a sample: its instruction is the input, its metadata names the task, and the
`cu-run` sandbox runs the task's setup when the sample's VM starts (before any solver). The
scorer ends the episode as `cu-run run` does: the desktop user's processes frozen, then the
verifier, checkpoints, write set and safety checks through the admin channel. Nothing the solver
did in the guest as the desktop user reaches the verdict but the guest's state.
"""

from __future__ import annotations

import anyio
from inspect_ai import Task as InspectTask
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import Solver, TaskState
from inspect_ai.util import SandboxEnvironmentSpec, sandbox

from runner.sandbox.provider import CuRunSandbox, CuRunSandboxConfig
from runner.errors import UsageError
from runner.runs.run_plan import named_image
from runner.tasks.model import Suite, TagFilter, Task, load_suite

SYSTEM_PROMPT = ("You operate a Linux desktop through the computer tool: screenshots, the mouse and the keyboard. "
                 "Do the task you are given, then answer with a short summary of what you did.")


def suite_samples(suite: str, tasks: list[str] | None = None, tags: list[str] | None = None) -> list[Sample]:
    """The samples of SUITE's tasks (TASKS by id, or those TAGS lets through)."""
    _loaded, chosen = _chosen(suite, tasks, tags)
    return [_sample(suite, t, t.id, {}) for t in chosen]


def task_sample(suite: str, task_id: str, *, id: str | None = None, metadata: dict | None = None) -> Sample:  # noqa: A002
    """One sample of SUITE's task TASK_ID, as ID [default: the task's id], with METADATA of the
    sample's own beside what names the task (a scripted solver's steps, say)."""
    found = {t.id: t for t in load_suite(suite).tasks}.get(task_id)
    if found is None:
        raise UsageError(f"suite {suite} has no task {task_id!r}", fix=f"cu-run tasks list --suite {suite}")
    return _sample(suite, found, id or task_id, metadata or {})


def _chosen(suite: str, tasks: list[str] | None, tags: list[str] | None) -> tuple[Suite, tuple[Task, ...]]:
    loaded = load_suite(suite)
    return loaded, loaded.select(tasks, TagFilter((tuple(tags),) if tags else (), ()))


def _sample(suite: str, task: Task, sample_id: str, metadata: dict) -> Sample:
    return Sample(id=sample_id, input=task.spec.instruction, target="pass",
                  metadata={**metadata, "cu_run_suite": suite, "cu_run_task": task.id, "timeout_s": task.spec.timeout_s})


def suite_task(suite: str, tasks: list[str] | None = None, tags: list[str] | None = None, image: str | None = None,
               solver: Solver | None = None) -> InspectTask:
    """SUITE as an Inspect task on IMAGE [default: the image its tasks name, as a run chooses it,
    else linux-test]. SOLVER [default: a ReAct agent with Inspect's computer() tool]. The time
    limit is the longest task's timeout_s."""
    loaded, chosen = _chosen(suite, tasks, tags)
    sandbox_image = image or named_image(loaded, chosen) or "linux-test"
    return InspectTask(dataset=[_sample(suite, t, t.id, {}) for t in chosen], solver=solver or default_solver(),
                       scorer=cu_run_scorer(),
                       sandbox=SandboxEnvironmentSpec("cu-run", CuRunSandboxConfig(image=sandbox_image)),
                       time_limit=max(t.spec.timeout_s for t in chosen))


def default_solver() -> Solver:
    from inspect_ai.agent import as_solver, react
    from inspect_ai.tool import computer

    return as_solver(react(prompt=SYSTEM_PROMPT, tools=[computer()]))


@scorer(metrics=[accuracy(), stderr()])
def cu_run_scorer() -> Scorer:
    """The cu-run task's own verdict, taken through the admin channel after the freeze."""

    async def score(state: TaskState, target: Target) -> Score:
        env = sandbox().as_type(CuRunSandbox)
        scored = await anyio.to_thread.run_sync(env.episode.conclude)
        return Score(value=CORRECT if scored.outcome == "pass" else INCORRECT, answer=scored.outcome,
                     explanation=scored.reason or scored.outcome,
                     metadata={"outcome": scored.outcome, "verifier": scored.verifier,
                               "checkpoints": scored.checkpoints,
                               "violations": [v.as_dict() for v in scored.violations],
                               "changed_outside_allowed": [str(c) for c in scored.changed],
                               "check_errors": scored.check_errors,
                               "episode_folder": str(env.episode.ep_dir)})

    return score
