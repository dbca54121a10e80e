"""A VM supply: which VM an episode gets, and what becomes of it after. Every front end gets its
VMs from one: a run's pool (pool_supply), the Inspect sandbox (runner.sandbox.task_vms), and
`vm up`, `mcp` and `check` (runner.runs.session, a supply of one slot). The supply makes each VM
with the factory it is given (runner.vm.factory), and a test gives it a fake one.

An episode claims a VM for its slot: the slot's standby when it has one (made while the last
episode ran, runner.runs.standby), else a warm state, its own or a spare whichever is free
first, else the slot's own to wait for, else a cold boot. It gives the VM back when it ends:
torn down in the background, so the slot's next episode need not wait, or, when the slot has a
standby to start on, kept until that episode's agent starts (QEMU exiting during the next
setup would slow it on two cores). When an episode's agent starts, the slot's last VM goes and
its next standby is begun. `drain` waits for every teardown; `stop` kills every VM in flight.

That is a run's start policy, and every front end's. What a front end changes is a named
option (SupplyOptions), set where that front end makes its supply, with why; a front end whose
episodes are not bound to slots lets the supply choose one (claim_free), and one that starts the
VM itself, outside an episode's script, asks `started`.

The races of the pool live here, behind these calls: a warm state is held by its lock from the
claim until the teardown releases it last, and a cold VM waits for the teardown of the last VM
of its name.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner.config import Settings
from runner.errors import InfraError
from runner.hypervisor.host import Host
from runner.runs.pool_config import PoolConfig
from runner.runs.standby import Standbys
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.vm.factory import EpisodeVmFactory, VmFactory
from runner.vm.warm_state import SlotLock, WarmSlot
from runner.workers import STOP_GRACE_S

Phase = Callable[[str], None]


@dataclass(frozen=True)
class SupplyOptions:
    """How a supply's VMs start. A run's pool takes them from its configuration (pool_supply); the
    other front ends change a few, each where it makes its supply and saying why."""

    slots: int = 1  # slots 0..slots-1
    # Slot -> its own warm state. A slot without one boots cold: a run's plan is all warm or all
    # cold (runner.vm.start_plan.plan_start), the Inspect sandbox's is per slot.
    warm: Mapping[int, WarmSlot] = field(default_factory=dict)
    spare_warm: tuple[WarmSlot, ...] = ()  # more warm states, restored while a slot's own is still held
    standby: bool = True  # with a spare and more work, each slot's next VM made ready ahead
    cold_after_failed_restore: bool = False  # started(): a warm start that fails is tried once more, cold


@dataclass
class Claim:
    """A slot's VM for one episode: started already (a standby) or not yet, and the phases its
    making took before the episode began (a standby's)."""

    slot: int
    vm: EpisodeVM
    phases: dict[str, float] = field(default_factory=dict)


def pool_supply(host: Host, settings: Settings, pool: PoolConfig, stopping: threading.Event,
                more_work: Callable[[], bool]) -> VmSupply:
    """A run's pool's supply: its VMs made for the pool's run, image and accelerator, and started
    as its configuration says (warm states, spares, standbys)."""
    make_vm = EpisodeVmFactory(host, pool.image, settings, run_id=pool.run_id, options=EpisodeOptions(accel=pool.accel))
    options = SupplyOptions(slots=pool.vm_pool, warm=pool.warm, spare_warm=pool.spare_warm, standby=pool.standby)
    return VmSupply(make_vm, options, stopping, more_work)


class VmSupply:
    def __init__(self, make_vm: VmFactory, options: SupplyOptions, stopping: threading.Event | None = None,
                 more_work: Callable[[], bool] = lambda: False) -> None:
        """MAKE_VM: how a VM is made; STOPPING: the run's stop; MORE_WORK(): whether episodes are
        still to come (a standby is made only then)."""
        self.options = options
        self._make_vm = make_vm
        self._stopping = stopping or threading.Event()
        self._more_work = more_work
        self._active: dict[int, EpisodeVM] = {}
        self._busy: set[int] = set()  # slots claimed and not yet given back
        self._busy_lock = threading.Lock()  # claim_free chooses and takes a slot at once
        self._teardowns: list[threading.Thread] = []
        self._teardowns_lock = threading.Lock()  # slots add to the list while drain() reads it
        self._standbys = Standbys()
        self._last_vm: dict[int, tuple[EpisodeVM, Path | None]] = {}

    # -- an episode's VM

    def claim(self, slot: int, artifacts: Path | None, phase: Phase = lambda _p: None) -> Claim:
        """SLOT's VM for an episode whose folder is ARTIFACTS; PHASE is told what the slot waits
        for: its standby, a restore or a boot (which then happens in the episode's start)."""
        with self._busy_lock:
            self._busy.add(slot)
        return self._claim(slot, artifacts, phase)

    def claim_free(self, artifacts: Path | None, phase: Phase = lambda _p: None) -> Claim:
        """As claim, in a slot no episode holds, for a front end whose episodes are not bound to
        slots (the Inspect sandbox: a sample takes whichever slot is free). A slot with its own
        warm state comes first: a cold boot is ~13 times slower under TCG. The caller admits no
        more episodes at once than there are slots."""
        with self._busy_lock:
            free = [s for s in range(self.options.slots) if s not in self._busy]
            if not free:
                raise RuntimeError(f"all {self.options.slots} slots are claimed: an episode past them must wait")
            slot = min(free, key=lambda s: (s not in self.options.warm, s))
            self._busy.add(slot)
        return self._claim(slot, artifacts, phase)

    def started(self, claim: Claim, notice: Callable[[str], None] = lambda _line: None) -> EpisodeVM:
        """CLAIM's VM, started (a standby's already is), for a front end that starts it outright;
        a run's episode starts it in its script (runner.runs.episode_script.play), where a failed
        start is blamed and retried. A start that fails has torn itself down, keeping its
        artifacts, and raises: the caller gives the slot back. With cold_after_failed_restore, a
        warm start that fails is tried once more cold, said through NOTICE; CLAIM then holds the
        cold VM."""
        if claim.vm.started:
            return claim.vm
        try:
            claim.vm.start()
        except InfraError as exc:
            if claim.vm.warm is None or not self.options.cold_after_failed_restore:
                raise
            notice(f"slot {claim.slot}: the warm restore failed ({exc}); booting cold")
            claim.vm = self._new_vm(claim.slot, None, None, artifacts=claim.vm.artifacts)
            self._active[claim.slot] = claim.vm
            self._wait_for_teardown_of(claim.vm.name)
            claim.vm.start()
        return claim.vm

    def agent_started(self, slot: int) -> None:
        """SLOT's episode reached its agent: the slot's last VM goes now, sharing the cores with
        the agent rather than the episode's admin commands, and its next standby is begun."""
        freeing = self._tear_down_last(slot)
        self._prepare_standby(slot, after=freeing)

    def give_back(self, slot: int, vm: EpisodeVM, artifacts: Path | None, *, torn_down: bool) -> None:
        """SLOT's episode on VM ended, and the slot is free. TORN_DOWN: VM was torn down already
        (an episode that failed, or a start that did); else it goes in the background (a failed
        teardown noted in ARTIFACTS), or waits for the next episode's agent when the slot has a
        standby to start on."""
        try:
            self._tear_down_last(slot)  # when this episode's agent never started
            if not torn_down:
                if self._standbys.has(slot):
                    self._last_vm[slot] = (vm, artifacts)
                else:
                    self._teardown_later(vm, artifacts)
        finally:
            self._active.pop(slot, None)
            with self._busy_lock:
                self._busy.discard(slot)

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
        self._standbys.kill_all()
        for vm in [*self._active.values(), *(last for last, _dir in list(self._last_vm.values()))]:
            vm.kill()

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

    # -- claims

    def _claim(self, slot: int, artifacts: Path | None, phase: Phase) -> Claim:
        """SLOT's VM, the slot already marked claimed; unmarked again when no VM comes of it."""
        try:
            if self._standbys.has(slot):
                phase("standby")
            vm, waited = self._standbys.take(slot, self._stopping)
            if vm is not None:
                vm.artifacts = artifacts
                # Made before this episode began: its start is not part of this episode's time.
                claim = Claim(slot, vm, {f"standby_{k}": v for k, v in vm.timings.phases.items()})
                claim.phases["standby_wait"] = round(waited, 3)
            else:
                self._tear_down_last(slot)  # it may hold the warm state this start needs
                warm, warm_lock = self._claim_warm(slot)
                phase("restore" if warm else "boot")
                claim = Claim(slot, self._new_vm(slot, warm, warm_lock, artifacts=artifacts))
                self._wait_for_teardown_of(claim.vm.name)
        except BaseException:
            with self._busy_lock:
                self._busy.discard(slot)
            raise
        self._active[slot] = claim.vm
        return claim

    # -- warm states

    def _claim_warm(self, slot: int) -> tuple[WarmSlot | None, SlotLock | None]:
        """The warm state SLOT restores, already held, and its lock: the slot's own when it is
        free, else a spare (the own one is still being torn down). With none free, (own, None):
        the episode waits for its own slot's lock in its start."""
        return self._free_warm(slot) or (self.options.warm.get(slot), None)

    def _free_warm(self, slot: int) -> tuple[WarmSlot, SlotLock] | None:
        """SLOT's own warm state or a spare, whichever is free first, held; None when none is
        (or the pool has no spares, when the own one is the only choice)."""
        own = self.options.warm.get(slot)
        if own is None or not self.options.spare_warm:
            return None
        for candidate in (own, *self.options.spare_warm):
            lock = candidate.lock()
            if lock.try_acquire():
                return candidate, lock
        return None

    def _prepare_standby(self, slot: int, after: threading.Thread | None = None) -> None:
        """Makes SLOT's next VM ready in the background when there is more work and a warm state
        free for it, or freed by AFTER, the last VM's teardown: then every episode after a slot's
        first starts on a standby."""
        if not self.options.standby or not self._more_work() or self._stopping.is_set():
            return

        def make() -> EpisodeVM | None:
            free = self._free_warm(slot)
            if free is None:
                return None
            return self._new_vm(slot, *free)

        self._standbys.prepare(slot, make, after=after)

    def _new_vm(self, slot: int, warm: WarmSlot | None, warm_lock: SlotLock | None,
                artifacts: Path | None = None) -> EpisodeVM:
        """An (unstarted) VM of this supply's for SLOT; ARTIFACTS: its episode's folder, once known."""
        return self._make_vm(slot, warm=warm, warm_lock=warm_lock, artifacts=artifacts)

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

    def _teardown_later(self, vm: EpisodeVM, artifacts: Path | None) -> threading.Thread:
        """Tears VM down in the background, so the slot's next episode need not wait for it. A
        teardown that fails is logged and noted in the episode folder; gc collects what it left."""
        def teardown() -> None:
            failed = vm.teardown()
            if failed and artifacts is not None:
                try:
                    (artifacts / "teardown-error.txt").write_text("\n".join(failed) + "\n")
                except OSError:
                    pass

        thread = threading.Thread(target=teardown, name=f"teardown-{vm.name}", daemon=True)
        with self._teardowns_lock:
            self._teardowns = [t for t in self._teardowns if t.is_alive()] + [thread]
        thread.start()
        return thread
