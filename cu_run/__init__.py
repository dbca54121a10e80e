"""cu-run's Python API: what the `cu-run` command does, for a lab's own scripts and notebooks.

    import cu_run

    result = cu_run.run("linux-core", "claude", vm_pool=2, trials=3, model="claude-sonnet-4-5")
    print(result.summary["overall"]["rate"])

    with cu_run.open_vm("linux-test") as vm:
        print(vm.user_shell.run("id -un").stdout)
        png = vm.display.screenshot()
        with vm.serve_mcp() as mcp:
            print(mcp.url, mcp.token)

    results = cu_run.read_results("runs/linux-core-...")
    comparison = cu_run.compare("runs/a", "runs/b")

The command line is a thin layer over these functions (runner.cli), so the two take the same
options and refuse the same bad input, with the same errors (cu_run.UsageError and the rest of
runner.errors). docs/api.md is the reference; docs/inspect.md shows cu-run inside inspect_ai.
"""

from __future__ import annotations

from runner.api import (
    Comparison,
    McpEndpoint,
    RunResults,
    Validation,
    VM,
    compare,
    open_vm,
    read_results,
    run,
    run_request,
    validate,
)
from runner import __version__ as runner_version
from runner.errors import CuRunError, InfraError, UsageError
from runner.runs.request import RunRequest
from runner.records.results import EpisodeRecord
from runner.runs.run import RunResult

__version__ = runner_version

__all__ = [
    "Comparison", "CuRunError", "EpisodeRecord", "InfraError", "McpEndpoint", "RunRequest", "RunResult", "RunResults",
    "UsageError", "VM", "Validation", "compare", "open_vm", "read_results", "run", "run_request", "validate",
]
