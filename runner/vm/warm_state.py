"""Warm start: per-slot saved RAM states that an episode restores in seconds instead of booting.

libvirt restores a saved state only into a domain with the name and UUID it was saved
under, so warm states belong to fixed slots (``cu-warm-<image>-<catalog hash>-<slot>``). Each slot
boots once from its own overlay of the golden disk, is saved, and that overlay is
frozen; an episode on the slot gets a fresh overlay on the frozen one and restores the
RAM state with the disk path (and ports, serial log, metadata) changed.

Layout, beside the image it belongs to:

    <image folder>/warm/slot-<i>/base.qcow2   the slot's overlay at save time, read-only
    <image folder>/warm/slot-<i>/ram.save     libvirt's saved RAM and device state
    <image folder>/warm/slot-<i>/warm.json    WarmState: what the state depends on; written
                                              last, so a folder without it is incomplete
    <image folder>/warm/slot-<i>.lock         held while the slot's domain runs (an episode,
                                              or the warming itself)

A state is used only when everything it depends on is unchanged (golden disk, kernel
and initrd, QEMU and libvirt versions, the device XML, the accelerator): restoring a
state into anything else is undefined, so a stale one is refused, never tried.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from runner.images.catalog import Image, sha256_file
from runner.network.carriers import FORWARDER
from runner.profiles.manifest import Frozen
from runner.profiles.parts import NetworkEnd
from runner.vm.domain import episode_domain_spec
from runner.errors import InfraError, UsageError
from runner.hypervisor.domain_xml import Accel, SlotIdentity, build_domain_xml
from runner.hypervisor.host import Host
from runner.owner import Owner

WARM_DIR = "warm"
STATE_FILE = "warm.json"
BASE_DISK = "base.qcow2"
RAM_FILE = "ram.save"
SAVED_NVRAM_FILE = "nvram.fd"  # UEFI images: the variable store as it was at the save
WARMING_OWNER_FILE = "owner.json"


class WarmDeps(Frozen):
    """What a saved state is only valid with. Any difference makes it stale."""

    golden_sha256: str
    kernel_sha256: str | None
    initrd_sha256: str | None
    firmware_sha256: str | None = None  # OVMF's code (windows); None for a direct kernel boot
    qemu: str
    libvirt: str
    accel: str
    device_xml_sha256: str
    memory_mib: int
    # What the state keeps of the guest's network end (NetworkEnd.warm_script, with the forwarder's
    # code): None for a guest that keeps nothing. A state saved before it was kept has None too.
    network_end_sha256: str | None = None


class WarmState(Frozen):
    image: str
    slot: int
    deps: WarmDeps
    created_at: datetime
    warm_seconds: float
    ram_bytes: int
    base_bytes: int


def warm_identity(image: Image, slot: int) -> SlotIdentity:
    """cu-warm-<image>-<folder hash>-<slot>: fixed for the slot, and distinct for the same
    image in two catalogs (two CU_RUN_HOMEs on one host never fight over a name)."""
    folder = hashlib.sha256(str(image.folder.resolve()).encode()).hexdigest()[:4]
    return SlotIdentity(f"warm-{image.name}-{folder}", slot)


def warm_root(image: Image) -> Path:
    return image.folder / WARM_DIR


def slot_folder(image: Image, slot: int) -> Path:
    return warm_root(image) / f"slot-{slot}"


@dataclass(frozen=True)
class WarmSlot:
    """A complete warm state on disk."""

    folder: Path
    state: WarmState

    @property
    def base(self) -> Path:
        return self.folder / BASE_DISK

    @property
    def ram(self) -> Path:
        return self.folder / RAM_FILE

    @property
    def nvram(self) -> Path:
        return self.folder / SAVED_NVRAM_FILE

    @property
    def bytes(self) -> int:
        return self.state.ram_bytes + self.state.base_bytes

    def lock(self) -> SlotLock:
        """The lock of this state's slot, slot_lock's: held by whoever runs the slot's domain."""
        return _lock_beside(self.folder, f"{self.state.image}-{self.state.slot}")


def slot_lock(image: Image, slot: int) -> SlotLock:
    return _lock_beside(slot_folder(image, slot), f"{image.name}-{slot}")


def _lock_beside(folder: Path, name: str) -> SlotLock:
    """The lock of the slot whose folder is FOLDER (made or not): slot-<i>.lock beside it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    return SlotLock(folder.with_name(f"{folder.name}.lock"), name)


def load_slot(image: Image, slot: int) -> WarmSlot | None:
    """The slot's warm state, or None when there is no complete one."""
    folder = slot_folder(image, slot)
    try:
        state = WarmState.model_validate_json((folder / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        raise UsageError(f"warm state {folder / STATE_FILE} is unreadable: {exc}",
                         fix=f"re-warm it: cu-run image warm {image.name} --force") from exc
    if not (folder / BASE_DISK).is_file() or not (folder / RAM_FILE).is_file():
        return None
    return WarmSlot(folder, state)


def _slot_folders(image: Image) -> list[tuple[Path, int | None]]:
    """Every slot folder of IMAGE with its slot number; None for a warmer's scratch folder."""
    root = warm_root(image)
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(root.glob("slot-*")):
        if folder.is_dir():
            index = folder.name.removeprefix("slot-")
            found.append((folder, int(index) if index.isdigit() else None))
    return found


def list_slots(image: Image) -> list[WarmSlot]:
    slots = [found for _folder, index in _slot_folders(image)
             if index is not None and (found := load_slot(image, index)) is not None]
    return sorted(slots, key=lambda s: s.state.slot)


def stale_reasons(saved: WarmDeps, current: WarmDeps) -> list[str]:
    """What changed since the state was saved, one phrase per difference; [] means usable."""
    labels = {
        "golden_sha256": "the golden disk changed",
        "kernel_sha256": "the kernel changed",
        "initrd_sha256": "the initrd changed",
        "firmware_sha256": "the UEFI firmware changed",
        "qemu": "QEMU's version changed",
        "libvirt": "libvirt's version changed",
        "accel": "the accelerator changed",
        "device_xml_sha256": "the domain's device XML changed",
        "memory_mib": "the guest memory size changed",
        "network_end_sha256": "the network end it keeps changed (the guest forwarder, or how it waits)",
    }
    reasons = []
    for name, label in labels.items():
        before, now = getattr(saved, name), getattr(current, name)
        if before != now:
            reasons.append(f"{label} ({_short(before)} -> {_short(now)})")
    return reasons


def _short(value: object) -> str:
    text = str(value)
    return text[:12] + "..." if len(text) > 16 else text


def current_deps(host: Host, image: Image, accel: Accel, libvirt_uri: str) -> WarmDeps:
    boot, firmware = image.manifest.boot, image.manifest.firmware
    versions = host.versions()
    return WarmDeps(
        golden_sha256=image.manifest.disk_sha256,
        kernel_sha256=sha256_file(image.path(boot.kernel)) if boot else None,
        initrd_sha256=sha256_file(image.path(boot.initrd)) if boot else None,
        firmware_sha256=sha256_file(Path(firmware.code)) if firmware else None,
        qemu=versions["hypervisor"],
        libvirt=versions["libvirt"],
        accel=accel,
        device_xml_sha256=hashlib.sha256(device_xml(image, accel, libvirt_uri).encode()).hexdigest(),
        memory_mib=image.manifest.memory_mib,
        network_end_sha256=hashlib.sha256(script.encode()).hexdigest() if (script := network_warm_script(image)) else None,
    )


def network_warm_script(image: Image) -> str | None:
    """What the warm state of IMAGE keeps of its guest's network end: NetworkEnd.warm_script."""
    end = image.manifest.guest.part(NetworkEnd)
    return end.warm_script(FORWARDER.read_bytes()) if end is not None else None


def device_xml(image: Image, accel: Accel, libvirt_uri: str) -> str:
    """The domain XML of a warm slot with every per-episode value (paths, ports, owner) fixed:
    what is left is the machine a saved state must be restored into."""
    spec = episode_domain_spec(image, warm_identity(image, 0), Path("/warm-episode"), accel, shell_port=1,
                               owner=Owner(0, 0), libvirt_uri=libvirt_uri, run_id="warm")
    return build_domain_xml(spec)


# -- holding a slot

class SlotLock:
    """An exclusive hold on one warm slot: its domain name can run only once at a time."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.name = name
        self._handle: IO | None = None

    def acquire(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise InfraError(f"warm slot {self.name} is in use by another run",
                                 fix="use another --vm-pool size, wait, or start cold (--start cold)") from None
            time.sleep(0.5)

    def try_acquire(self) -> bool:
        """Takes the slot if nobody holds it; says whether it did."""
        self._handle = self.path.open("a")
        try:
            fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            self.release()
            return False

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the descriptor drops the flock
            self._handle = None


def remove_warm(image: Image) -> list[str]:
    """Deletes every warm state of IMAGE; returns what was removed."""
    removed = []
    for folder, index in _slot_folders(image):
        lock = slot_lock(image, index) if index is not None else None  # a scratch folder has none
        if lock is not None:
            lock.acquire(timeout=60)  # never pull a state from under a running episode
        try:
            shutil.rmtree(folder)
            removed.append(str(folder))
        finally:
            if lock is not None:
                lock.release()
    return removed
