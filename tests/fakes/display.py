"""FakeDisplay and LocalShell: the narrowest seams, for unit tests of what sits on top of them.

The real backends (VNC, SSH) are covered end to end on real VMs in tests/e2e.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

from PIL import Image

from runner.display.base import Display, DisplayInfo
from runner.display.keys import keysym
from runner.errors import CommandTimeout
from runner.guest.base import ExecResult, GuestShell


class FakeDisplay(Display):
    """An in-memory screen that records what was done to it."""

    def __init__(self, width: int = 320, height: int = 200) -> None:
        self.size = DisplayInfo(width, height)
        self.calls: list[tuple] = []
        self._pointer = (0, 0)

    def info(self) -> DisplayInfo:
        return self.size

    def screenshot(self) -> bytes:
        image = Image.new("RGB", (self.size.width, self.size.height), "#1f6f8b")
        image.paste((255, 255, 255), (10, 10, 60, 40))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()

    def move(self, x, y):
        self.check_point(x, y)
        self.calls.append(("move", x, y))
        self._pointer = (x, y)

    def click(self, x, y, button="left", *, double=False):
        self.check_point(x, y)
        self.calls.append(("click", x, y, button, double))
        self._pointer = (x, y)

    def drag(self, x1, y1, x2, y2, button="left"):
        self.check_point(x1, y1)
        self.check_point(x2, y2)
        self.calls.append(("drag", x1, y1, x2, y2, button))

    def scroll(self, x, y, direction, amount=3):
        if direction not in ("up", "down", "left", "right"):
            raise ValueError(f"bad direction {direction}")
        self.check_point(x, y)
        self.calls.append(("scroll", x, y, direction, amount))

    def key(self, key, modifiers=()):
        keysym(key)
        for m in modifiers:
            keysym(m)
        self.calls.append(("key", key, tuple(modifiers)))

    def type(self, text, *, delay=None):
        for ch in text:
            keysym(ch)
        self.calls.append(("type", text))

    @property
    def pointer(self):
        return self._pointer

    def close(self):
        pass


class LocalShell(GuestShell):
    """Runs scripts with sh on this host: stands in for a guest's shell in unit tests."""

    def wait_ready(self, timeout: float) -> float:
        return 0.0

    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        try:
            done = subprocess.run(["sh", "-s"], input=script, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise CommandTimeout(f"ran past {timeout} s") from exc
        return ExecResult(done.returncode, done.stdout, done.stderr)

    def put(self, local: Path, remote: str) -> None:
        Path(remote).write_bytes(local.read_bytes())

    def get(self, remote: str, local: Path) -> None:
        local.write_bytes(Path(remote).read_bytes())

    def close(self) -> None:
        pass
