"""After the agent: its processes in the guest stop, so they play no part in verification.

A hostile agent can leave a process behind that waits for the verifier and tampers with
it, or with the files it reads, while it runs. So before the listings, the verifier and
the checks, every process of the desktop user is stopped, through the admin channel:

- By default (Linux) the user's whole slice is frozen (cgroup v2 freezer): the agent's
  processes, however they were started or daemonized, stop at once and stay stopped; the
  session is not torn down, so nothing respawns. Any process of the user outside that
  slice is killed.
- A task that needs the desktop alive while it is verified (``desktop_in_verify: true``)
  keeps what was running before the agent began (by PID and start time, so a reused PID is
  not kept), except the shells on its terminals, which the agent could type into;
  everything of the user's started since is killed while the slice is frozen, so nothing
  can fork away from the kill. The kept processes are then thawed and continued (SIGCONT),
  so none the agent stopped can hang the verifier's queries. On Windows, where a session
  cannot be frozen, the desktop user's processes started during the episode and its
  console shells are stopped.

A stop that fails after the agent ran is the agent's doing: the caller scores it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from runner.errors import InfraError
from runner.guest.base import FilesystemFreezer, GuestShell
from runner.guest.qga import AgentCommandFailed
from runner.hypervisor.qcow2_reader import DiskImage, ImageReadError
from runner.profiles import DesktopUser, GuestProfile
from runner.scoring.disk_listing import list_disk
from runner.scoring.ext4_reader import DiskFormatError, Ext4
from runner.profiles.listing import Listing, Watch, WriteSetLister, step_then_list, take_listing
from runner.profiles.parts import Quarantine

QUARANTINE_TIMEOUT = 60.0
T = TypeVar("T")


def user_processes(admin: GuestShell, user: DesktopUser, guest: GuestProfile) -> frozenset[str]:
    """The desktop user's processes now, each as the profile names one (PID and start time):
    taken just before the agent starts. Only a guest with a quarantine spares any."""
    part = guest.needs(Quarantine, "sparing the processes that ran before the agent")
    result = admin.run(part.processes_script(user), timeout=30)
    if not result.ok:
        raise InfraError(f"could not list {user.name}'s processes: {result.stderr.strip()[-300:]}")
    return frozenset(word for word in result.stdout.split() if _PROCESS.fullmatch(word))


_PROCESS = re.compile(r"[0-9]+:[0-9]+")


def quarantine(admin: GuestShell, user: DesktopUser, guest: GuestProfile, *,
               keep: frozenset[str] | None = None) -> str:
    """Stops the agent's processes; KEEP: the processes to spare (user_processes), else all stop.
    Returns what was done, for the episode's log; raises InfraError when it could not be done.
    A guest without a quarantine stops nothing, and the log says so."""
    part = guest.part(Quarantine)
    if part is None:
        return not_quarantined(guest)
    result = admin.run(part.quarantine_script(user, keep), timeout=QUARANTINE_TIMEOUT)
    if not result.ok:
        raise _not_stopped(user, result)
    return result.stdout.strip()


def not_quarantined(guest: GuestProfile) -> str:
    return (f"nothing stopped: {guest.name} guests have no quarantine, so the agent's processes ran on "
            "while it was verified")


def quarantine_then_list(admin: GuestShell, user: DesktopUser, guest: GuestProfile, watch: Watch, *,
                         keep: frozenset[str] | None = None) -> tuple[str, Listing]:
    """quarantine(), then the write-set listing of WATCH, in one guest command where the profile
    can chain them (runner.profiles.listing.step_then_list): what was stopped, and the listing."""
    lister = guest.needs(WriteSetLister, "the write set")
    part = guest.part(Quarantine)
    chained = None if part is None else step_then_list(
        admin, guest.scripts, lister, part.quarantine_script(user, keep), f"stopping {user.name}'s processes",
        QUARANTINE_TIMEOUT, watch)
    if chained is None:  # this guest's shell runs them one by one, or has nothing to stop them with
        return quarantine(admin, user, guest, keep=keep), take_listing(admin, lister, watch)
    stopped, listing = chained
    if listing is None:
        raise _not_stopped(user, stopped)
    return stopped.stdout.strip(), listing


def quarantine_then_read_disk(admin: GuestShell, user: DesktopUser, guest: GuestProfile, watch: Watch,
                              disk: Path, *, keep: frozenset[str] | None = None) -> tuple[str, Listing]:
    """quarantine(), then the write-set listing of WATCH read from DISK (the episode's overlay)
    on the host (read_disk_listing)."""
    freezer = admin.freezer()
    if freezer is None:
        raise InfraError("the guest's disk is read only with its filesystems frozen, and this admin shell cannot "
                         "freeze them")
    stopped = quarantine(admin, user, guest, keep=keep)
    return stopped, read_disk_listing(freezer, watch, disk)


def read_disk_listing(freezer: FilesystemFreezer, watch: Watch, disk: Path) -> Listing:
    """The listing of WATCH read from DISK on the host, with the guest's filesystems frozen
    meanwhile by FREEZER: no program of the guest, whoever made it, lists or hashes anything.
    Freezing writes out what the guest held and empties ext4's journal into place, and the guest
    writes nothing until the thaw, so the disk reads as the guest's kernel would show it."""
    return read_frozen_disk(freezer, disk, lambda fs: list_disk(fs, watch))


def read_frozen_disk(freezer: FilesystemFreezer, disk: Path, read: Callable[[Ext4], T]) -> T:
    """READ's answer on the ext4 filesystem of DISK, with the guest's filesystems frozen by FREEZER
    meanwhile (read_disk_listing says why). Raises InfraError when the disk cannot be read."""
    try:
        freezer.freeze_filesystems()
    except AgentCommandFailed as exc:
        raise InfraError(f"could not freeze the guest's filesystems to read its disk: {exc}") from None
    try:
        with DiskImage(disk) as image:
            return read(Ext4(image.read))
    except (ImageReadError, DiskFormatError, OSError) as exc:
        raise InfraError(f"the guest's disk could not be read: {exc}") from None
    finally:
        try:
            freezer.thaw_filesystems()
        except AgentCommandFailed as exc:
            raise InfraError(f"could not thaw the guest's filesystems after reading its disk: {exc}") from None


def _not_stopped(user: DesktopUser, result) -> InfraError:
    return InfraError(f"could not stop {user.name}'s processes before verification (exit {result.exit_code}): "
                      f"{(result.stderr.strip() or result.stdout.strip())[-300:]}")
