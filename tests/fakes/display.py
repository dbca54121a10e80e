"""FakeDisplay and LocalShell: the narrowest seams, for unit tests of what sits on top of them.

The real backends (VNC, SSH) are covered end to end on real VMs in tests/e2e.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
from pathlib import Path

from PIL import Image

from runner.display.base import Display, DisplayInfo
from runner.display.keys import keysym
from runner.errors import CommandTimeout
from runner.guest.base import ExecResult, GuestShell
from typing_extensions import override


class FakeDisplay(Display):
    """An in-memory screen that records what was done to it."""

    def __init__(self, width: int = 320, height: int = 200) -> None:
        self.size = DisplayInfo(width, height)
        self.calls: list[tuple] = []
        self._pointer = (0, 0)

    @override
    def info(self) -> DisplayInfo:
        return self.size

    @override
    def screenshot(self) -> bytes:
        image = Image.new("RGB", (self.size.width, self.size.height), "#1f6f8b")
        image.paste((255, 255, 255), (10, 10, 60, 40))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()

    @override
    def move(self, x, y):
        self.check_point(x, y)
        self.calls.append(("move", x, y))
        self._pointer = (x, y)

    @override
    def click(self, x, y, button="left", *, double=False):
        self.check_point(x, y)
        self.calls.append(("click", x, y, button, double))
        self._pointer = (x, y)

    @override
    def drag(self, x1, y1, x2, y2, button="left"):
        self.check_point(x1, y1)
        self.check_point(x2, y2)
        self.calls.append(("drag", x1, y1, x2, y2, button))

    @override
    def scroll(self, x, y, direction, amount=3):
        if direction not in ("up", "down", "left", "right"):
            raise ValueError(f"bad direction {direction}")
        self.check_point(x, y)
        self.calls.append(("scroll", x, y, direction, amount))

    @override
    def key(self, key, modifiers=()):
        keysym(key)
        for m in modifiers:
            keysym(m)
        self.calls.append(("key", key, tuple(modifiers)))

    @override
    def type(self, text, *, delay=None):
        for ch in text:
            keysym(ch)
        self.calls.append(("type", text))

    @property
    @override
    def pointer(self):
        return self._pointer

    @override
    def close(self):
        pass


class LocalShell(GuestShell):
    """Runs scripts with sh on this host: stands in for a guest's shell in unit tests."""

    @override
    def wait_ready(self, timeout: float) -> float:
        return 0.0

    @override
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        # In a session of its own, so a timeout kills everything the script started, as a
        # guest shell's `timeout -k` does (the conformance checks hold it to that).
        proc = subprocess.Popen(["sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(script, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise CommandTimeout(f"ran past {timeout} s") from exc
        return ExecResult(proc.returncode, stdout, stderr)

    @override
    def put(self, local: Path, remote: str) -> None:
        Path(remote).write_bytes(local.read_bytes())

    @override
    def get(self, remote: str, local: Path) -> None:
        local.write_bytes(Path(remote).read_bytes())

    @override
    def close(self) -> None:
        pass
