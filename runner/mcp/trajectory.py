"""What the agent did, recorded by proxies around Display and GuestShell (not inside backends).

Every call becomes a line of trajectory.jsonl: step, time, tool, action, arguments,
result summary, duration, and for screenshots the PNG saved beside it. A step limit
(--max-steps) refuses calls past it and says so, which ends the episode as a timeout.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from runner.display.base import Button, Display, DisplayInfo, ScrollDirection
from runner.guest.base import ExecResult, GuestShell
from typing_extensions import override

T = TypeVar("T")
# The MCP tool being served, so a recorded display call carries the agent's own name for it.
CURRENT_TOOL: contextvars.ContextVar[str | None] = contextvars.ContextVar("cu_run_tool", default=None)


class StepLimitReached(Exception):
    """The agent used up its --max-steps."""


class Trajectory:
    def __init__(self, folder: Path | None, max_steps: int | None = None) -> None:
        self.folder = folder
        self.max_steps = max_steps
        self.steps = 0
        self.limit_reached = False
        self._lock = threading.Lock()
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def path(self) -> Path | None:
        return self.folder / "trajectory.jsonl" if self.folder else None

    def record(self, action: str, args: dict[str, Any], call: Callable[[], T],
               summarize: Callable[[T], str] = lambda r: "ok", screenshot: Callable[[T], bytes | None] = lambda r: None) -> T:
        with self._lock:
            if self.max_steps is not None and self.steps >= self.max_steps:
                self.limit_reached = True
                raise StepLimitReached(f"the step limit ({self.max_steps}) is reached; the episode is over")
            self.steps += 1
            step = self.steps
        started = time.monotonic()
        entry: dict[str, Any] = {"step": step, "time": datetime.now(UTC).isoformat(),
                                 "tool": CURRENT_TOOL.get() or action, "action": action, "arguments": args}
        try:
            result = call()
        except Exception as exc:
            entry.update(result=f"error: {type(exc).__name__}: {exc}", error=True)
            self._write(entry, started)
            raise
        entry["result"] = summarize(result)
        png = screenshot(result)
        if png is not None and self.folder is not None:
            name = f"step-{step:04d}.png"
            (self.folder / name).write_bytes(png)
            entry["screenshot"] = name
        self._write(entry, started)
        return result

    def _write(self, entry: dict[str, Any], started: float) -> None:
        entry["duration_s"] = round(time.monotonic() - started, 4)
        if self.path is None:
            return
        with self._lock, self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")


def append_intervention(path: Path, entry: dict[str, Any], phase: str | None = None) -> None:
    """A person's input in the live view (--live-control), as a trajectory line of its own: not
    a step of the agent's (step None), marked so safety checks and step counts leave it out."""
    line = {"step": None, "time": datetime.now(UTC).isoformat(), "tool": "human", "action": "intervention",
            "intervention": True, "arguments": entry}
    if phase is not None:
        line["phase"] = phase
    with _INTERVENTION_LOCK, path.open("a") as f:
        f.write(json.dumps(line) + "\n")


_INTERVENTION_LOCK = threading.Lock()


class RecordingDisplay(Display):
    """A Display whose every call is a trajectory step."""

    def __init__(self, inner: Display, trajectory: Trajectory) -> None:
        self.inner = inner
        self.trajectory = trajectory

    @override
    def info(self) -> DisplayInfo:
        return self.trajectory.record("info", {}, self.inner.info, lambda i: f"{i.width}x{i.height}")

    @override
    def screenshot(self) -> bytes:
        return self.trajectory.record("screenshot", {}, self.inner.screenshot,
                                      lambda png: f"{len(png)} bytes PNG", screenshot=lambda png: png)

    @override
    def move(self, x: int, y: int) -> None:
        self.trajectory.record("move", {"x": x, "y": y}, lambda: self.inner.move(x, y))

    @override
    def click(self, x: int, y: int, button: Button = "left", *, double: bool = False) -> None:
        self.trajectory.record("click", {"x": x, "y": y, "button": button, "double": double},
                               lambda: self.inner.click(x, y, button, double=double))

    @override
    def drag(self, x1: int, y1: int, x2: int, y2: int, button: Button = "left") -> None:
        self.trajectory.record("drag", {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "button": button},
                               lambda: self.inner.drag(x1, y1, x2, y2, button))

    @override
    def scroll(self, x: int, y: int, direction: ScrollDirection, amount: int = 3) -> None:
        self.trajectory.record("scroll", {"x": x, "y": y, "direction": direction, "amount": amount},
                               lambda: self.inner.scroll(x, y, direction, amount))

    @override
    def key(self, key: str, modifiers: tuple[str, ...] = ()) -> None:
        self.trajectory.record("key", {"key": key, "modifiers": list(modifiers)}, lambda: self.inner.key(key, modifiers))

    @override
    def type(self, text: str, *, delay: float | None = None) -> None:
        self.trajectory.record("type", {"text": text, "delay": delay}, lambda: self.inner.type(text, delay=delay))

    @property
    @override
    def pointer(self) -> tuple[int, int]:
        return self.trajectory.record("pointer", {}, lambda: self.inner.pointer, lambda p: f"{p[0]},{p[1]}")

    @override
    def check_point(self, x: int, y: int) -> None:
        self.inner.check_point(x, y)  # validation only: not a step

    @override
    def close(self) -> None:
        self.inner.close()


class RecordingShell(GuestShell):
    """A GuestShell whose every call is a trajectory step (the file tools go through it)."""

    def __init__(self, inner: GuestShell, trajectory: Trajectory) -> None:
        self.inner = inner
        self.trajectory = trajectory

    @override
    def wait_ready(self, timeout: float) -> float:
        return self.inner.wait_ready(timeout)

    @override
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        return self.trajectory.record("run", {"script": script[:500], "timeout": timeout},
                                      lambda: self.inner.run(script, timeout), lambda r: f"exit {r.exit_code}")

    @override
    def put(self, local: Path, remote: str) -> None:
        self.trajectory.record("put", {"local": str(local), "remote": remote}, lambda: self.inner.put(local, remote))

    @override
    def get(self, remote: str, local: Path) -> None:
        self.trajectory.record("get", {"remote": remote, "local": str(local)}, lambda: self.inner.get(remote, local))

    @override
    def close(self) -> None:
        self.inner.close()
