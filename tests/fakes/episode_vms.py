"""Stand-ins for what a VM supply is given (runner.runs.vm_supply): a VM factory, injected as
every front end's real one is (runner.vm.factory), whose VMs record what was done to them, and
warm states whose locks are real lock files, as EpisodeVM's are.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from runner.vm.warm_state import SlotLock


def fake_warm(folder: Path, slot: int) -> SimpleNamespace:
    """SLOT's warm state, its lock a file in FOLDER (a real one's sits beside its slot's folder)."""
    return SimpleNamespace(state=SimpleNamespace(slot=slot),
                           lock=lambda: SlotLock(folder / f"slot-{slot}.lock", f"img-{slot}"))


class FakeVm:
    """An episode VM as the supply and its standbys use it: what it was made with, and each call
    made on it in `done`. Its teardown releases the warm lock it was given, last, as EpisodeVM's."""

    def __init__(self, name: str = "cu-warm-0", *, warm=None, warm_lock=None, artifacts=None, fail_start=None,
                 fail_warm_up=None, gone_later=None, hold: threading.Event | None = None):
        self.name = name
        self.warm, self.warm_lock, self.artifacts = warm, warm_lock, artifacts
        self.done: list[str] = []
        self.started = False
        self.timings = SimpleNamespace(phases={"restore": 0.5})
        self._fail_start, self._fail_warm_up, self._gone_later, self._hold = fail_start, fail_warm_up, gone_later, hold

    def start(self):
        if self._hold is not None:
            self._hold.wait(5)
        self.done.append("start")
        if self._fail_start:
            self.teardown()  # as EpisodeVM.start does on failure
            raise self._fail_start
        self.started = True

    def warm_up(self):
        self.done.append("warm_up")
        if self._fail_warm_up:
            raise self._fail_warm_up

    def still_ready(self):
        self.done.append("still_ready")
        if self._gone_later:
            raise self._gone_later

    def kill(self):
        self.done.append("kill")

    def teardown(self):
        self.done.append("teardown")
        self.started = False
        if self.warm_lock is not None:
            self.warm_lock.release()
        return []


class FakeVmFactory:
    """Makes FakeVms, named as EpisodeVM's are: for the warm state's slot, or for the run's slot
    when cold; keeps them in `made`. FAIL_WARM_START: what every warm VM's start raises."""

    def __init__(self, fail_warm_start: Exception | None = None) -> None:
        self.made: list[FakeVm] = []
        self._fail_warm_start = fail_warm_start

    def __call__(self, slot: int, *, warm=None, warm_lock=None, artifacts=None) -> FakeVm:
        name = f"cu-warm-{warm.state.slot}" if warm is not None else f"cu-t-{slot}"
        vm = FakeVm(name, warm=warm, warm_lock=warm_lock, artifacts=artifacts,
                    fail_start=self._fail_warm_start if warm is not None else None)
        self.made.append(vm)
        return vm
