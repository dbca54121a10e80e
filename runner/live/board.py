"""What the live view shows, and where it gets it: the LiveSource seam.

The server (runner.live.server) knows nothing of runs or VMs. It asks a LiveSource for the
slots, a slot's screen, and how to reach a slot's VNC. A run's pool (SchedulerSource) and a
single VM (`vm up --live`, `mcp --live`: SingleVmSource) are the two sources.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runner.display.base import Display

# A tile's screen is taken at most this often per slot, however many pages poll it.
SCREEN_MAX_AGE_S = 1.0


@dataclass(frozen=True)
class SlotView:
    slot: int
    task_id: str
    trial: int
    phase: str
    elapsed_s: float

    def as_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "task_id": self.task_id, "trial": self.trial, "phase": self.phase,
                "elapsed_s": round(self.elapsed_s, 1)}


@dataclass(frozen=True)
class VncTarget:
    """A slot's VNC on loopback, its episode's password, and who hears of a person's input."""

    host: str
    port: int
    password: str | None
    on_input: Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Finished:
    task_id: str
    trial: int
    outcome: str
    intervened: bool = False

    def as_json(self) -> dict[str, Any]:
        # report.html names each episode's section <task>-<trial>
        return {"task_id": self.task_id, "trial": self.trial, "outcome": self.outcome,
                "intervened": self.intervened, "report": f"run/report.html#{self.task_id}-{self.trial}"}


class LiveSource(Protocol):
    title: str

    def slots(self) -> list[SlotView]:
        """The busy slots, in slot order."""

    def progress(self) -> tuple[int, int]:
        """(episodes done, episodes planned)."""

    def finished(self) -> list[Finished]: ...

    def display(self, slot: int) -> Display | None:
        """The slot's screen, or None while it has no VM."""

    def vnc(self, slot: int) -> VncTarget | None:
        """How to reach the slot's VNC, or None while it has no VM."""


class ScreenCache:
    """The latest PNG of each slot, taken at most once a SCREEN_MAX_AGE_S: tiles poll, the VM is not
    asked more than once a second for them."""

    def __init__(self, source: LiveSource, max_age_s: float = SCREEN_MAX_AGE_S) -> None:
        self.source = source
        self.max_age_s = max_age_s
        self._shots: dict[int, tuple[float, Display, bytes]] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, slot: int) -> bytes | None:
        display = self.source.display(slot)
        if display is None:
            return None
        with self._guard:
            lock = self._locks.setdefault(slot, threading.Lock())
        with lock:
            taken = self._shots.get(slot)
            # A new episode on the slot has a new display: its screen, not the last one's.
            if taken is not None and taken[1] is display and time.monotonic() - taken[0] < self.max_age_s:
                return taken[2]
            try:
                png = display.screenshot()
            except Exception:  # noqa: BLE001 - the VM went away between asking and taking: no screen
                return None
            self._shots[slot] = (time.monotonic(), display, png)
            return png
