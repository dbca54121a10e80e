"""A slot's next VM, made ready while the slot's current episode runs.

A warm episode used to start by restoring its VM, waiting for the guest and fixing its clock:
~3 s under TCG, during which the slot did nothing else. A standby does that work in the
background, while the episode before it runs, on a spare warm state (one the pool's slots do
not hold), and then runs the profile's warm-up once, so the episode's first commands do not
pay for TCG translating the guest's code afresh. The next episode on the slot takes it over
and starts with its setup.

A standby is the runner's own: no agent has touched it, and it serves exactly one episode.
One that fails to start is logged and dropped; its episode starts a VM itself, as it would
have without one. One left unused when the slot has no more work is torn down.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.vm.episode import EpisodeVM
from runner.errors import InfraError
from runner.scoring.blame import describe

log = logging.getLogger(__name__)
STANDBY_WAIT_S = 120.0  # the longest a standby waits for the teardown that frees its warm state


def leaves_a_core(vm_pool: int) -> bool:
    """Whether a pool of VM_POOL leaves a core for standbys: each TCG vCPU wants a core, and at
    pool 2 on 2 cores standbys slowed the run (docs/performance.md)."""
    return vm_pool < (os.cpu_count() or 1)


@dataclass
class Standby:
    vm: EpisodeVM | None  # None until a warm state is free for it (and then, when none was)
    made: threading.Event = field(default_factory=threading.Event)  # started and warmed up, or failed
    error: BaseException | None = None


class Standbys:
    """At most one standby VM per pool slot."""

    def __init__(self) -> None:
        self._by_slot: dict[int, Standby] = {}
        self._lock = threading.Lock()

    def prepare(self, slot: int, make_vm: Callable[[], EpisodeVM | None],
                after: threading.Thread | None = None) -> None:
        """Starts making SLOT's standby in the background, unless it has one; MAKE_VM returns the
        (unstarted) VM, or None when there is no warm state to spare for it. AFTER: a teardown
        that frees a warm state (the slot's last VM's): when none is free now, the standby is
        made once AFTER has ended, so a pool of one on two warm states gets one every episode."""
        with self._lock:
            if slot in self._by_slot:
                return
            vm = make_vm()
            if vm is None and (after is None or not after.is_alive()):
                return
            standby = self._by_slot[slot] = Standby(vm)
        if vm is not None:
            threading.Thread(target=_make, args=(standby,), name=f"standby-{slot}", daemon=True).start()
            return

        freeing = after
        assert freeing is not None

        def when_freed() -> None:
            freeing.join(timeout=STANDBY_WAIT_S)
            try:
                standby.vm = make_vm()
            except BaseException as exc:  # noqa: BLE001 - kept for take(), which logs it
                standby.error = exc
            if standby.vm is None or standby.error is not None:
                standby.made.set()
                return
            _make(standby)

        threading.Thread(target=when_freed, name=f"standby-{slot}", daemon=True).start()

    def has(self, slot: int) -> bool:
        with self._lock:
            return slot in self._by_slot

    def take(self, slot: int, stop: threading.Event) -> tuple[EpisodeVM | None, float]:
        """SLOT's standby, once made and still ready, and how long it was waited for; (None, waited)
        when the slot has none, it failed, or STOP was set while waiting (it is torn down then)."""
        with self._lock:
            standby = self._by_slot.pop(slot, None)
        if standby is None:
            return None, 0.0
        t = time.monotonic()
        while not standby.made.wait(0.2):
            if stop.is_set():
                break
        waited = time.monotonic() - t
        if standby.error is not None:
            log.warning("slot %d: the standby VM did not start (%s); starting one now", slot, describe(standby.error))
            return None, waited
        if standby.vm is None:  # no warm state came free for it
            return None, waited
        if stop.is_set():
            _discard(standby)
            return None, waited
        try:
            standby.vm.still_ready()
        except InfraError as exc:
            log.warning("slot %d: the standby VM %s is no longer ready (%s); starting one now", slot,
                        standby.vm.name, exc.message)
            _discard(standby)
            return None, waited
        return standby.vm, waited

    def names(self) -> list[str]:
        """The domain names of the standbys made or being made."""
        with self._lock:
            return [s.vm.name for s in self._by_slot.values() if s.vm is not None]

    def discard(self, slot: int) -> None:
        """Tears SLOT's standby down (once made): the slot has no more work for it."""
        with self._lock:
            standby = self._by_slot.pop(slot, None)
        if standby is not None:
            _discard(standby)

    def discard_all(self) -> None:
        with self._lock:
            slots = list(self._by_slot)
        for slot in slots:
            self.discard(slot)

    def kill_all(self) -> None:
        """Kills every standby's domain now (the run is stopping), so a start in progress fails fast."""
        with self._lock:
            vms = [s.vm for s in self._by_slot.values() if s.vm is not None]
        for vm in vms:
            vm.kill()


def _make(standby: Standby) -> None:
    assert standby.vm is not None
    try:
        standby.vm.start()  # a start that fails tears itself down
        try:
            standby.vm.warm_up()
        except BaseException:
            standby.vm.teardown()
            raise
    except BaseException as exc:  # noqa: BLE001 - kept for take(), which logs it
        standby.error = exc
    finally:
        standby.made.set()


def _discard(standby: Standby) -> None:
    """Tears a standby down once made (one that failed to start tore itself down); a step that
    fails is logged, and gc collects what it left."""
    standby.made.wait()
    if standby.error is None and standby.vm is not None:
        failed = standby.vm.teardown()
        for what in failed:
            log.warning("tearing down the standby %s: %s", standby.vm.name, what)
