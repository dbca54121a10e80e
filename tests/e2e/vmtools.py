"""Helpers for the e2e tests: run the CLI, find a domain's QEMU, wait for a condition."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    from runner.display.conditions import DisplayObserver, WaitFor
    from runner.display.conditions import wait_for as wait_condition
    from runner.guest.agent import GuestAgent

    observer = DisplayObserver(vm.display, GuestAgent(vm.shell, vm.image.manifest.guest_agent,
                                                       vm.image.manifest.guest.scripts.quote_arguments))
    wait_condition(WaitFor(focused=pattern, timeout=timeout), observer)


def guest_file(vm, path: str, timeout: float = 120.0, complete=lambda text: text.endswith("\n")) -> str:
    """PATH's contents once the guest has written it completely (by default: up to a newline)."""
    def read():
        text = vm.shell.run(f"cat {path} 2>/dev/null", timeout=30).stdout
        return text if complete(text) else None

    return wait_for(read, timeout, f"{path} in the guest")


def leftovers(host, settings) -> list[str]:
    """Domains and episode folders whose runner is gone: what a clean exit must never leave."""
    from runner.vm.gc import folder_owner
    from runner.owner import Owner

    found = [f"domain {d.name}" for d in host.cu_domains()
             if d.tag and not Owner(d.tag.owner_pid, d.tag.owner_start).alive()]
    if settings.episodes_dir.exists():
        for folder in settings.episodes_dir.iterdir():
            owner = folder_owner(folder)
            if owner is None or not owner.alive():
                found.append(f"folder {folder}")
    return found


class Lines:
    """A process's output read line by line in the background, so a test can wait for a line
    while the process runs, and still have all of it afterwards."""

    def __init__(self, stream) -> None:
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._lines.append("")  # the end: nothing more will come
            self._changed.notify_all()

    def wait_for(self, text: str, timeout: float) -> str:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(text in line for line in self._lines) or self._lines[-1:] == [""], timeout)
            assert found and any(text in line for line in self._lines), \
                f"no {text!r} within {timeout:.0f} s in:\n{self.text()[-3000:]}"
            return next(line for line in self._lines if text in line)

    def text(self) -> str:
        return "".join(self._lines)

    def close(self, timeout: float = 30) -> str:
        self._thread.join(timeout)
        return self.text()


@contextmanager
def libvirt_paused() -> Iterator[None]:
    """libvirtd stopped (SIGSTOP) for the block, and continued however it ends: every libvirt
    call meanwhile waits. It holds a teardown open for as long as a test needs, with no timing."""
    pid_file = next((p for p in (Path("/run/libvirtd.pid"), Path("/run/virtqemud.pid")) if p.exists()), None)
    assert pid_file is not None, "no /run/libvirtd.pid or /run/virtqemud.pid: is libvirt's daemon running?"
    pid = int(pid_file.read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
