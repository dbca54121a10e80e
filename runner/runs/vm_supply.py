"""A pool's VM supply: which VM a slot's episode gets, and what becomes of it after.

An episode claims a VM for its slot: the slot's standby when it has one (made while the last
episode ran, runner.runs.standby), else a warm state, its own or a spare whichever is free
first, else the slot's own to wait for, else a cold boot. It gives the VM back when it ends:
torn down in the background, so the slot's next episode need not wait, or, when the slot has a
standby to start on, kept until that episode's agent starts (QEMU exiting during the next
setup would slow it on two cores). When an episode's agent starts, the slot's last VM goes and
its next standby is begun. `drain` waits for every teardown; `stop` kills every VM in flight.

The races of the pool live here, behind these calls: a warm state is held by its lock from the
claim until the teardown releases it last, and a cold VM waits for the teardown of the last VM
of its name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.config import Settings
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.errors import InfraError
from runner.hypervisor.host import Host
from runner.vm.warm_state import SlotLock, WarmSlot, slot_lock
from runner.runs.pool_config import PoolConfig
from runner.runs.standby import Standbys
from runner.workers import STOP_GRACE_S

Phase = Callable[[str], None]


@dataclass
class Claim:
    """A slot's VM for one episode: started already (a standby) or not yet, and the phases its
    making took before the episode began (a standby's)."""

    vm: EpisodeVM
    phases: dict[str, float] = field(default_factory=dict)


class VmSupply:
    def __init__(self, host: Host, settings: Settings, pool: PoolConfig, stopping: threading.Event,
                 more_work: Callable[[], bool]) -> None:
        """STOPPING: the run's stop; MORE_WORK(): whether episodes are still to come (a standby
        is made only then)."""
        self.host = host
        self.settings = settings
        self.pool = pool
        self._stopping = stopping
        self._more_work = more_work
        self._active: dict[int, EpisodeVM] = {}
        self._teardowns: list[threading.Thread] = []
        self._teardowns_lock = threading.Lock()  # slots add to the list while drain() reads it
        self._standbys = Standbys()
        self._last_vm: dict[int, tuple[EpisodeVM, Path]] = {}

    # -- an episode's VM

    def claim(self, slot: int, artifacts: Path, phase: Phase = lambda _p: None) -> Claim:
        """SLOT's VM for an episode whose folder is ARTIFACTS; PHASE is told what the slot waits
        for: its standby, a restore or a boot (which then happens in the episode's start)."""
        if self._standbys.has(slot):
            phase("standby")
        vm, waited = self._standbys.take(slot, self._stopping)
        if vm is not None:
            vm.artifacts = artifacts
            # Made before this episode began: its start is not part of this episode's time.
            claim = Claim(vm, {f"standby_{k}": v for k, v in vm.timings.phases.items()})
            claim.phases["standby_wait"] = round(waited, 3)
        else:
            self._tear_down_last(slot)  # it may hold the warm state this start needs
            warm, warm_lock = self._claim_warm(slot)
            phase("restore" if warm else "boot")
            claim = Claim(self._new_vm(slot, warm, warm_lock, artifacts=artifacts))
            self._wait_for_teardown_of(claim.vm.name)
        self._active[slot] = claim.vm
        return claim

    def agent_started(self, slot: int) -> None:
        """SLOT's episode reached its agent: the slot's last VM goes now, sharing the cores with
        the agent rather than the episode's admin commands, and its next standby is begun."""
        freeing = self._tear_down_last(slot)
        self._prepare_standby(slot, after=freeing)

    def give_back(self, slot: int, vm: EpisodeVM, artifacts: Path, *, torn_down: bool) -> None:
        """SLOT's episode on VM ended. TORN_DOWN: it was torn down already (an episode that
        failed, or a start that did); else it goes in the background, or waits for the next
        episode's agent when the slot has a standby to start on."""
        try:
            self._tear_down_last(slot)  # when this episode's agent never started
            if not torn_down:
                if self._standbys.has(slot):
                    self._last_vm[slot] = (vm, artifacts)
                else:
                    self._teardown_later(vm, artifacts)
        finally:
            self._active.pop(slot, None)

    def active(self, slot: int) -> EpisodeVM | None:
        """The VM SLOT's episode runs on now, or None between episodes."""
        return self._active.get(slot)

    # -- the pool's end

    def slot_ended(self, slot: int) -> None:
        """SLOT has no more work: its standby and its last VM go."""
        self._standbys.discard(slot)
        self._tear_down_last(slot)

    def stop(self) -> None:
        """The run is ending: every VM in flight is killed, so blocked calls on it return."""
        self._standbys.destroy_all(self.host.destroy)
        for vm in [*self._active.values(), *(last for last, _dir in list(self._last_vm.values()))]:
            try:
                self.host.destroy(vm.name)
            except InfraError:
                pass

    def drain(self, timeout: float = STOP_GRACE_S) -> None:
        """Waits for the teardowns still running in the background: nothing is left behind."""
        deadline = time.monotonic() + timeout
        self._standbys.discard_all()
        for slot in list(self._last_vm):
            self._tear_down_last(slot)
        with self._teardowns_lock:
            pending = list(self._teardowns)
        for thread in pending:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._teardowns_lock:
            self._teardowns = [t for t in self._teardowns if t.is_alive()]

    def still_there(self) -> list[str]:
        """What has not been torn down yet: VMs in episodes, those being torn down, standbys."""
        left = [f"VM {vm.name}" for vm in list(self._active.values())]
        left += [f"VM {vm.name}" for vm, _dir in list(self._last_vm.values())]
        with self._teardowns_lock:
            left += [t.name.replace("teardown-", "VM ", 1) + " (being torn down)" for t in self._teardowns if t.is_alive()]
        left += [f"standby VM {name}" for name in self._standbys.names()]
        return left

    # -- warm states

    def _claim_warm(self, slot: int) -> tuple[WarmSlot | None, SlotLock | None]:
        """The warm state SLOT restores, already held, and its lock: the slot's own when it is
        free, else a spare (the own one is still being torn down). With none free, (own, None):
        the episode waits for its own slot's lock in its start."""
        return self._free_warm(slot) or (self.pool.warm.get(slot), None)

    def _free_warm(self, slot: int) -> tuple[WarmSlot, SlotLock] | None:
        """SLOT's own warm state or a spare, whichever is free first, held; None when none is
        (or the pool has no spares, when the own one is the only choice)."""
        own = self.pool.warm.get(slot)
        if own is None or not self.pool.spare_warm:
            return None
        for candidate in (own, *self.pool.spare_warm):
            lock = slot_lock(self.pool.image, candidate.state.slot)
            if lock.try_acquire():
                return candidate, lock
        return None

    def _prepare_standby(self, slot: int, after: threading.Thread | None = None) -> None:
        """Makes SLOT's next VM ready in the background when there is more work and a warm state
        free for it, or freed by AFTER, the last VM's teardown: then every episode after a slot's
        first starts on a standby."""
        if not self.pool.standby or not self._more_work() or self._stopping.is_set():
            return

        def make() -> EpisodeVM | None:
            free = self._free_warm(slot)
            if free is None:
                return None
            return self._new_vm(slot, *free)

        self._standbys.prepare(slot, make, after=after)

    def _new_vm(self, slot: int, warm: WarmSlot | None, warm_lock: SlotLock | None,
                artifacts: Path | None = None) -> EpisodeVM:
        """An (unstarted) VM of this pool's for SLOT; ARTIFACTS: its episode's folder, once known."""
        return EpisodeVM(self.host, self.pool.image, self.settings, run_id=self.pool.run_id, slot=slot,
                         options=EpisodeOptions(accel=self.pool.accel), artifacts=artifacts, warm=warm,
                         warm_lock=warm_lock)

    # -- teardown

    def _tear_down_last(self, slot: int) -> threading.Thread | None:
        """Starts tearing down SLOT's last VM, if it still waits for that: the teardown's thread."""
        last = self._last_vm.pop(slot, None)
        return None if last is None else self._teardown_later(*last)

    def _wait_for_teardown_of(self, name: str) -> None:
        """Until the last VM named NAME is torn down. A cold VM boots under its slot's fixed name
        and folder, so the slot's last one must be gone first: its teardown destroys by name and
        removes that folder, and would take the new VM with it. (A warm one is already ordered
        after that teardown by its slot's lock, which a teardown releases last: the wait adds
        nothing for it.)"""
        with self._teardowns_lock:
            pending = [t for t in self._teardowns if t.name == f"teardown-{name}"]
        for thread in pending:
            thread.join()

    def _teardown_later(self, vm: EpisodeVM, artifacts: Path) -> threading.Thread:
        """Tears VM down in the background, so the slot's next episode need not wait for it. A
        teardown that fails is logged and noted in the episode folder; gc collects what it left."""
        def teardown() -> None:
            failed = vm.teardown()
            if failed:
                try:
                    (artifacts / "teardown-error.txt").write_text("\n".join(failed) + "\n")
                except OSError:
                    pass

        thread = threading.Thread(target=teardown, name=f"teardown-{vm.name}", daemon=True)
        with self._teardowns_lock:
            self._teardowns = [t for t in self._teardowns if t.is_alive()] + [thread]
        thread.start()
        return thread
