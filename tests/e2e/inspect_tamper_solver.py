"""A tamper solver for Inspect: instead of doing the task it runs the tamper suite's attack
(the task's oracle.sh) as the desktop user, through the sandbox's exec, which is all an
Inspect agent's tools get. Used by test_inspect_eval.py through `inspect eval --solver`."""

from pathlib import Path

from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import sandbox


@solver
def tamper() -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        suite, task = Path(state.metadata["cu_run_suite"]), state.metadata["cu_run_task"]
        attack = (suite / task / "oracle.sh").read_text()
        ran = await sandbox().exec(["bash", "-c", attack], timeout=120)
        state.output.completion = f"attack exited {ran.returncode}: {ran.stdout[-300:]}{ran.stderr[-300:]}"
        return state

    return solve
