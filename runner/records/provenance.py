"""What a run ran on: host, accelerator, image, suite, agent and runner versions."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from runner import __version__


def host_facts() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {"hostname": platform.node(), "cpu": cpu, "cores": os.cpu_count(), "memory_gib": memory_gib,
            "kernel": platform.release(), "python": platform.python_version()}


def runner_facts() -> dict:
    return {"version": __version__}
