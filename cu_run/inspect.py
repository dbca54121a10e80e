"""cu-run inside inspect_ai: the names an Inspect task uses (docs/inspect.md).

    from inspect_ai import Task
    from cu_run.inspect import CuRunSandboxConfig, cu_run_scorer, task_sample

    Task(dataset=[task_sample("linux-core", "folder-tree")], solver=..., scorer=cu_run_scorer(),
         sandbox=("cu-run", "linux-test"))

The sandbox itself registers as `cu-run` through Inspect's entry point; nothing needs importing
for `sandbox=("cu-run", IMAGE)` to work.
"""

from __future__ import annotations

from runner.sandbox.provider import CuRunConnection, CuRunSandbox, CuRunSandboxConfig
from runner.sandbox.suite import cu_run_scorer, default_solver, suite_samples, suite_task, task_sample

__all__ = ["CuRunConnection", "CuRunSandbox", "CuRunSandboxConfig", "cu_run_scorer", "default_solver", "suite_samples",
           "suite_task", "task_sample"]
