"""OSWorld (xlang-ai/OSWorld): its tasks on linux-desktop, in shell (runner.benchmarks.linux_steps)."""

from __future__ import annotations

import json
import re

from runner.benchmarks import linux_steps
from runner.benchmarks.registry import Benchmark, Profile, UpstreamTask, register


def fidelity(task: UpstreamTask, setup: linux_steps.Script) -> list[str]:
    """Where linux-desktop differs from OSWorld's Ubuntu VM, as far as TASK can tell."""
    notes = []
    text = json.dumps({"config": task.data.get("config"), "evaluator": task.data.get("evaluator")})
    if re.search(r'"python3?"|pyautogui', text):
        notes.append("python is Debian 12's python3, with pyautogui from PyPI (upstream: Ubuntu 22.04's)")
    if task.domain == "chrome" or "google-chrome" in text:
        notes.append("google-chrome is Debian's Chromium under Chrome's name and profile folder")
    if re.search(r'"pkill", "chrome"|"(pkill|killall) chrome"', text):
        notes.append("upstream's `pkill chrome` ends Chromium and waits until it has exited (its profile written)")
    if task.domain == "os" or re.search(r"gnome|gsettings|nautilus", text):
        notes.append("the desktop is XFCE, not GNOME: GNOME's settings and apps are not there")
    if any("upstream sleeps" in line for line in setup.lines):
        notes.append("a sleep before activate_window waits for that window instead")
    if "sudo" in text:
        notes.append("upstream's user has sudo (password 'password'); here setup and collection run as root "
                     "and the agent has no sudo: a solution that needs root cannot be done here")
    return notes


OSWORLD = register(Benchmark(
    name="osworld",
    examples_root="evaluation_examples",
    profile=Profile("linux", "linux-desktop", ".sh", linux_steps.STEPS_SH, linux_steps.setup_script,
                    linux_steps.collect_script, frozenset(linux_steps.COLLECTORS), fidelity),
    steps=linux_steps,
    asset_hosts=("huggingface.co",),
    missing_apps={"vs_code": "VS Code is not in linux-desktop (Debian ships no VS Code package)"},
))
