"""cu-run suites as Inspect tasks: `inspect eval cu_run/suite -T suite=linux-core --model ...`.

Each cu-run task is a sample: its instruction is the input, its metadata names the task, and the
`cu-run` sandbox runs the task's setup when the sample's VM starts (before any solver). The
scorer ends the episode as `cu-run run` does: the desktop user's processes frozen, then the
verifier, checkpoints, write set and safety checks through the admin channel. Nothing the solver
did in the guest as the desktop user reaches the verdict but the guest's state.
"""

from __future__ import annotations

import anyio
from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import Solver, TaskState
from inspect_ai.util import SandboxEnvironmentSpec, sandbox

from runner.sandbox.provider import CuRunSandbox, CuRunSandboxConfig
from runner.tasks.model import TagFilter, load_suite

SYSTEM_PROMPT = ("You operate a Linux desktop through the computer tool: screenshots, the mouse and the keyboard. "
                 "Do the task you are given, then answer with a short summary of what you did.")


def suite_samples(suite: str, tasks: list[str] | None = None, tags: list[str] | None = None) -> list[Sample]:
    """The samples of SUITE's tasks (TASKS by id, or those TAGS lets through)."""
    loaded = load_suite(suite)
    chosen = loaded.select(tasks, TagFilter((tuple(tags),) if tags else (), ()))
    return [Sample(id=t.id, input=t.spec.instruction, target="pass",
                   metadata={"cu_run_suite": suite, "cu_run_task": t.id, "timeout_s": t.spec.timeout_s})
            for t in chosen]


def suite_task(suite: str, tasks: list[str] | None = None, tags: list[str] | None = None, image: str | None = None,
               solver: Solver | None = None) -> Task:
    """SUITE as an Inspect task on IMAGE [default: the image its tasks name, else linux-test]. SOLVER
    [default: a ReAct agent with Inspect's computer() tool]. The time limit is the longest task's
    timeout_s."""
    samples = suite_samples(suite, tasks, tags)
    loaded = load_suite(suite)
    named = {t.spec.image for t in loaded.tasks if t.id in {s.id for s in samples} and t.spec.image}
    chosen_image = image or (named.pop() if len(named) == 1 else "linux-test")
    return Task(dataset=samples, solver=solver or default_solver(), scorer=cu_run_scorer(),
                sandbox=SandboxEnvironmentSpec("cu-run", CuRunSandboxConfig(image=chosen_image)),
                time_limit=max(int(s.metadata["timeout_s"]) for s in samples if s.metadata))


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
