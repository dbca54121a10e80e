"""The live view's sources: a run's pool of slots, and one VM on its own."""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from runner.display.base import Display
from runner.vm.episode import EpisodeVM
from runner.errors import InfraError
from runner.live.board import Finished, LiveSource, SlotView, VncTarget
from runner.runs.scheduler import SlotStatus
from runner.records.results import EpisodeRecord
from typing_extensions import override


class SlotsView(Protocol):
    """A local pool's slots as the live view reads them: a scheduler's, or a pool's of several."""

    def statuses(self) -> dict[int, SlotStatus]: ...

    def active_vm(self, slot: int) -> EpisodeVM | None: ...

    def intervene(self, slot: int, entry: dict[str, Any]) -> None: ...


class SchedulerSource(LiveSource):
    """A local run or study: its slots, the episodes it has finished, and its VMs' screens."""

    def __init__(self, scheduler: SlotsView, title: str, total: int, done_before: int = 0) -> None:
        self.scheduler = scheduler
        self.title = title
        self.total = total
        self._done_before = done_before
        self._finished: list[Finished] = []
        self._lock = threading.Lock()

    def record(self, r: EpisodeRecord) -> None:
        """Called with each record the run keeps."""
        with self._lock:
            self._finished.append(Finished(r.task_id, r.trial, r.outcome, r.intervened))

    @override
    def slots(self) -> list[SlotView]:
        now = time.monotonic()
        return [SlotView(slot, s.task_id, s.trial, s.phase, now - s.episode_since)
                for slot, s in sorted(self.scheduler.statuses().items()) if s.task_id]

    @override
    def progress(self) -> tuple[int, int]:
        with self._lock:
            return self._done_before + len(self._finished), self.total

    @override
    def finished(self) -> list[Finished]:
        with self._lock:
            return list(self._finished)

    @override
    def display(self, slot: int) -> Display | None:
        vm = self.scheduler.active_vm(slot)
        return _display_of(vm)

    @override
    def vnc(self, slot: int) -> VncTarget | None:
        return _vnc_of(self.scheduler.active_vm(slot), lambda entry: self.scheduler.intervene(slot, entry))


class SingleVmSource(LiveSource):
    """One VM (`vm up --live`, `mcp --live`): slot 0, whose phase is what it is serving."""

    def __init__(self, vm: EpisodeVM, phase: str, on_input=lambda _entry: None) -> None:
        self.vm = vm
        self.title = vm.name
        self.phase = phase
        self.on_input = on_input
        self._since = time.monotonic()

    @override
    def slots(self) -> list[SlotView]:
        return [SlotView(0, self.vm.name, 0, self.phase, time.monotonic() - self._since)]

    @override
    def progress(self) -> tuple[int, int]:
        return 0, 1

    @override
    def finished(self) -> list[Finished]:
        return []

    @override
    def display(self, slot: int) -> Display | None:
        return _display_of(self.vm) if slot == 0 else None

    @override
    def vnc(self, slot: int) -> VncTarget | None:
        return _vnc_of(self.vm, self.on_input) if slot == 0 else None


def _vnc_of(vm: EpisodeVM | None, on_input) -> VncTarget | None:
    """VM's VNC on loopback and its episode's password, or None while it has no endpoints."""
    if vm is None or vm.endpoints is None:
        return None
    host, port = vm.endpoints.vnc.rsplit(":", 1)
    return VncTarget(host, int(port), vm.vnc_password, on_input)


def _display_of(vm: EpisodeVM | None) -> Display | None:
    if vm is None:
        return None
    try:
        return vm.display
    except InfraError:  # not started yet, or torn down: no screen now
        return None
