"""Helpers for the e2e tests: run the CLI, find a domain's QEMU, wait for a condition."""

import os
import subprocess
import sys
import time
from pathlib import Path


def cu_run(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`cu-run ARGS` in a wide terminal (rich does not wrap table cells across lines); ENV over ours."""
    env = {**os.environ, "COLUMNS": "400", **(env or {})}
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True, env=env, **kwargs)


def qemu_pid(domain: str) -> int:
    return int(Path(f"/run/libvirt/qemu/{domain}.pid").read_text())


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def wait_focused(vm, pattern: str, timeout: float = 60.0) -> None:
    """Until the focused window's title or app matches PATTERN: keys sent sooner go elsewhere."""
    from runner.agents.conditions import DisplayObserver, WaitFor
    from runner.agents.conditions import wait_for as wait_condition
    from runner.guest.agent import GuestAgent

    observer = DisplayObserver(vm.display, GuestAgent(vm.shell, vm.image.manifest.guest_agent))
    wait_condition(WaitFor(focused=pattern, timeout=timeout), observer)


def guest_file(vm, path: str, timeout: float = 120.0, complete=lambda text: text.endswith("\n")) -> str:
    """PATH's contents once the guest has written it completely (by default: up to a newline)."""
    def read():
        text = vm.shell.run(f"cat {path} 2>/dev/null", timeout=30).stdout
        return text if complete(text) else None

    return wait_for(read, timeout, f"{path} in the guest")


def leftovers(host, settings) -> list[str]:
    """Domains and episode folders whose runner is gone: what a clean exit must never leave."""
    from runner.gc import folder_owner
    from runner.owner import Owner

    found = [f"domain {d.name}" for d in host.cu_domains()
             if d.tag and not Owner(d.tag.owner_pid, d.tag.owner_start).alive()]
    if settings.episodes_dir.exists():
        for folder in settings.episodes_dir.iterdir():
            owner = folder_owner(folder)
            if owner is None or not owner.alive():
                found.append(f"folder {folder}")
    return found
