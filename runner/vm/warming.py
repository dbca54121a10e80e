"""`cu-run image warm`: boot each slot once, save its RAM state and freeze its overlay.

Each slot is built in a scratch folder and renamed into place only when complete
(runner.images.scratch), so an interrupted warm leaves every finished slot usable and nothing
half-made in its place.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from runner.images.catalog import Image
from runner.vm.episode import EPISODE_MIN_FREE_BYTES, EpisodeOptions, check_free_space
from runner.vm.factory import EpisodeVmFactory
from runner.errors import InfraError, UsageError
from runner.guest.agent import GuestAgent
from runner.hypervisor.domain_xml import Accel
from runner.hypervisor.host import Host
from runner.owner import me
from runner.vm.admission import admit, available_mib
from runner.images.scratch import scratch_then_rename
from runner.workers import Workers, taking_from
from runner.vm.warm_state import (
    BASE_DISK,
    SAVED_NVRAM_FILE,
    WARMING_OWNER_FILE,
    RAM_FILE,
    STATE_FILE,
    WarmDeps,
    WarmSlot,
    WarmState,
    current_deps,
    load_slot,
    network_warm_script,
    slot_folder,
    slot_lock,
    stale_reasons,
    warm_identity,
)

Progress = Callable[[str], None]
WARM_APPS_TIMEOUT_S = 900.0  # each big app started once, under TCG
WARM_NETWORK_TIMEOUT_S = 120.0  # python3 started once, under TCG on a busy host


def warm_image(host: Host, settings, image: Image, slots: int, accel: Accel, *, force: bool = False,
               progress: Progress = print, first: int = 0, warm_apps: bool = True) -> list[WarmSlot]:
    """Makes a valid warm state for slots FIRST..FIRST+SLOTS-1, keeping the ones that already are.
    WARM_APPS: run the image's warm_apps first, so its apps start faster after a restore (a
    bench turns it off to measure what it brings).

    The slots to make boot side by side, as many at once as the host has cores and memory for:
    each boot is one busy vCPU thread under TCG, so a second core halves the wait. A slot that
    fails leaves the others made, and the first failure is raised once they have ended."""
    if slots < 1:
        raise UsageError("--slots must be at least 1")
    image.verify_disk()
    current = current_deps(host, image, accel, settings.libvirt_uri)
    kept: dict[int, WarmSlot] = {}
    to_make = []
    for slot in range(first, first + slots):
        found = load_slot(image, slot)
        if found is not None and not force and not stale_reasons(found.state.deps, current):
            progress(f"slot {slot}: warm state is current ({found.bytes / 2**20:.0f} MiB), kept")
            kept[slot] = found
        else:
            to_make.append(slot)
    if to_make:
        # A slot keeps a RAM state (about the guest's memory) and its frozen overlay.
        check_free_space(image.folder, len(to_make) * image.manifest.memory_mib * 2**20 + EPISODE_MIN_FREE_BYTES,
                         f"warming {len(to_make)} slot(s) of {image.name}")
        at_once = admit(min(len(to_make), os.cpu_count() or 1), image.manifest.memory_mib, accel,
                        available_mib()).admitted
        boots = _SideBySide(host, image)
        made = boots.run(to_make, at_once,
                         lambda slot: _warm_slot(host, settings, image, slot, accel, current, progress, warm_apps, boots))
        kept.update(made)
    return [kept[slot] for slot in sorted(kept)]


class _SideBySide:
    """Makes slots on worker threads (runner.workers), with nothing left half-made on Ctrl-C.

    A boot in a worker cannot be interrupted: on Ctrl-C the slots not begun are skipped, and the
    VM of each slot being made is destroyed (again until its worker ends: a boot may define its
    domain late), so its boot or save fails at once and its own teardown removes the domain and
    the scratch folder. The interruption is raised once every worker has ended."""

    def __init__(self, host: Host, image: Image) -> None:
        self.host = host
        self.image = image
        self.stopping = threading.Event()
        self._guard = threading.Lock()
        self._held: set[int] = set()  # slots whose lock this process holds: their domains are ours

    def hold(self, slot: int) -> None:
        """Called with the slot's lock taken, before its VM starts: a stopping warm starts none."""
        with self._guard:
            if self.stopping.is_set():
                raise KeyboardInterrupt
            self._held.add(slot)

    def let_go(self, slot: int) -> None:
        """Called before the slot's lock is released: from then on its domain name is not ours."""
        with self._guard:
            self._held.discard(slot)

    def run(self, slots: list[int], at_once: int, make: Callable[[int], WarmSlot]) -> dict[int, WarmSlot]:
        """MAKE for each of SLOTS, AT_ONCE at a time. Once every slot has ended, raises the
        first failure in slot order, or returns what each made."""
        pending: queue.SimpleQueue[int] = queue.SimpleQueue()
        for slot in slots:
            pending.put(slot)
        outcomes: dict[int, WarmSlot | BaseException] = {}

        def do(_worker: int, slot: int) -> None:
            try:
                outcomes[slot] = make(slot)
            except BaseException as exc:  # noqa: BLE001 - kept, and raised in slot order below
                outcomes[slot] = exc

        take = taking_from(pending)
        Workers(take, do, stop_work=self._destroy_held, still_there=self.still_there,
                name=lambda index: f"warm-{index}", stopping=self.stopping).run(range(at_once))
        for slot in slots:
            if isinstance(outcome := outcomes[slot], BaseException):
                raise outcome
        return {slot: outcome for slot, outcome in outcomes.items() if not isinstance(outcome, BaseException)}

    def _destroy_held(self) -> None:
        with self._guard:  # a slot's lock is not released while its domain is being destroyed
            for slot in self._held:
                try:
                    self.host.destroy(warm_identity(self.image, slot).name)
                except InfraError:
                    pass  # libvirt is gone too: the boot fails on its own, and gc finds what is left

    def still_there(self) -> list[str]:
        with self._guard:
            return [f"warm slot {slot} of {self.image.name} (VM {warm_identity(self.image, slot).name})"
                    for slot in sorted(self._held)]


def _warm_slot(host: Host, settings, image: Image, slot: int, accel: Accel, current: WarmDeps,
               progress: Progress, warm_apps: bool, boots: _SideBySide) -> WarmSlot:
    final = slot_folder(image, slot)
    lock = slot_lock(image, slot)
    lock.acquire(timeout=600)  # an episode on this slot's domain name finishes first
    try:
        boots.hold(slot)
        with scratch_then_rename(final, final.with_name(f"{final.name}.partial-{os.getpid()}")) as scratch:
            owner = me()
            (scratch / WARMING_OWNER_FILE).write_text(json.dumps({"owner_pid": owner.pid, "owner_start": owner.start}))
            started = time.monotonic()
            progress(f"slot {slot}: booting under {accel.upper()} to the desktop")
            make_vm = EpisodeVmFactory(host, image, settings, run_id="warm", options=EpisodeOptions(accel=accel))
            vm = make_vm(slot, identity=warm_identity(image, slot))
            with vm:
                if image.manifest.guest_agent:
                    # restored episodes expect it answering, on the desktop user's channel as the agent's tools ask
                    GuestAgent(vm.shell, image.manifest.guest_agent, image.manifest.guest.scripts.quote_arguments,
                               channel=f"the desktop user {image.manifest.desktop_user.name}'s shell").ping()
                if warm_apps and image.manifest.warm_apps:
                    progress(f"slot {slot}: desktop up after {time.monotonic() - started:.0f} s; starting each app once")
                    ran = vm.shell.run(image.manifest.warm_apps, timeout=WARM_APPS_TIMEOUT_S)
                    if not ran.ok:
                        raise InfraError(f"warming the apps of {image.name} failed (exit {ran.exit_code}): "
                                         f"{(ran.stderr or ran.stdout).strip()[-300:]}")
                network = network_warm_script(image)
                if network is not None:  # the network end's start, kept (NetworkEnd.warm_script)
                    readied = vm.admin_shell.run(network, timeout=WARM_NETWORK_TIMEOUT_S)
                    if not readied.ok:
                        raise InfraError(f"readying the network end of {image.name} failed (exit {readied.exit_code}): "
                                         f"{(readied.stderr or readied.stdout).strip()[-300:]}")
                progress(f"slot {slot}: desktop up after {time.monotonic() - started:.0f} s; saving RAM state")
                vm.save_state(scratch / RAM_FILE, scratch / BASE_DISK, scratch / SAVED_NVRAM_FILE)
            (scratch / BASE_DISK).chmod(0o444)
            (scratch / RAM_FILE).chmod(0o444)
            state = WarmState(image=image.name, slot=slot, deps=current, created_at=datetime.now(UTC),
                              warm_seconds=round(time.monotonic() - started, 1),
                              ram_bytes=(scratch / RAM_FILE).stat().st_size,
                              base_bytes=(scratch / BASE_DISK).stat().st_size)
            (scratch / WARMING_OWNER_FILE).unlink()
            (scratch / STATE_FILE).write_text(state.model_dump_json(indent=2) + "\n")
    finally:
        boots.let_go(slot)
        lock.release()
    progress(f"slot {slot}: warm in {state.warm_seconds:.0f} s, RAM state {state.ram_bytes / 2**20:.0f} MiB")
    return WarmSlot(final, state)
