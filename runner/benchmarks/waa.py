"""WindowsAgentArena (microsoft/WindowsAgentArena): its tasks on windows-11, in PowerShell
(runner.benchmarks.windows_steps)."""

from __future__ import annotations

from runner.benchmarks import linux_steps, windows_steps
from runner.benchmarks.registry import Benchmark, Profile, UpstreamTask, register


def fidelity(task: UpstreamTask, setup: linux_steps.Script) -> list[str]:
    """Where windows-11 differs from WAA's VM, as far as TASK can tell."""
    notes = ["the guest is cu-run's windows-11 image, not WAA's; its user is cu, not Docker "
             "(C:\\Users\\Docker in upstream's paths is the desktop user's home)"]
    if any("upstream sleeps" in line for line in setup.lines):
        notes.append("a sleep before activate_window waits for that window instead")
    return notes


WAA = register(Benchmark(
    name="waa",
    examples_root="src/win-arena-container/client/evaluation_examples_windows",
    profile=Profile("windows", "windows-11", ".ps1", windows_steps.STEPS_PS1, windows_steps.setup_script,
                    windows_steps.collect_script, frozenset(windows_steps.COLLECTORS), fidelity),
    steps=windows_steps,
    # One WAA task downloads a public file from Google Drive: a download like the others.
    asset_hosts=("raw.githubusercontent.com", "drive.google.com"),
))
