"""Checked by mypy in CI (pyproject's [tool.mypy] files), never run: cu_run's keyword arguments are
typed (runner.runs.request.RunOptions), so a misspelt or mistyped option is a type error.

Each wrong call carries the ignore of the error mypy must find. With warn_unused_ignores, an ignore
that has nothing to ignore is itself an error: were the options typed `Any` again, this file fails.
"""

from pathlib import Path

import cu_run


def right_calls() -> None:
    cu_run.run("linux-core", "claude", tasks=["env-var"], vm_pool=2, trials=3, out=Path("runs/x"), start="warm",
               agent_env={"A": "1"}, tools="screen,mouse")
    cu_run.validate("linux-core", trials=2, accel="tcg", out="runs/v")
    cu_run.run_request("linux-core", "nop", gate="stable", fail_under=0.5)


def wrong_calls() -> None:
    cu_run.run("linux-core", "claude", vm_pools=2)  # type: ignore[call-arg]
    cu_run.run("linux-core", "claude", vm_pool="2")  # type: ignore[arg-type]
    cu_run.validate("linux-core", trials=None)  # type: ignore[arg-type]
    cu_run.run_request("linux-core", "nop", fail_under="high")  # type: ignore[arg-type]
