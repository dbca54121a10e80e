"""One episode's VM: overlay, domain, shell and screen, and their teardown on every path.

    make_vm = EpisodeVmFactory(host, image, settings, run_id="r1")  # runner.vm.factory: the one maker
    with make_vm(slot=0) as vm:
        vm.shell.run("uname -a")
        vm.display.screenshot()

Everything created is tracked as it is created; teardown undoes each step on its own
(one failure does not skip the rest), is idempotent, and runs whether the body
returned, raised, timed out or was interrupted. A failed start cleans up its own
partial state and re-raises the original error.
"""

from __future__ import annotations

import json
import logging
import secrets
import shutil
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner.images.catalog import Image
from runner.config import Settings, free_bytes
from runner.display.base import Display
from runner.errors import GuestStopped, GuestUnreachable, HostFault, InfraError, UsageError
from runner.guest.base import GuestShell
from runner.hypervisor.domain_xml import Accel, DomainSpec, SlotIdentity, redacted
from runner.hypervisor.host import Host
from runner.owner import Owner, me
from runner.screen import color_fraction, is_blank
from runner.vm.domain import EPISODE_NVRAM_FILE, episode_domain_spec
from runner.profiles import DesktopUser, GuestProfile, ShellEndpoint
from runner.profiles.parts import WarmUp
from runner.vm.warm_state import SlotLock, WarmSlot, warm_identity

log = logging.getLogger(__name__)

EPISODE_OWNER_FILE = "owner.json"
SHELL_READY_TIMEOUT = 240.0  # after a restore; a cold boot waits its profile's boot_shell_timeout
DESKTOP_READY_TIMEOUT = 120.0
DESKTOP_SHARE = 0.15  # share of the screen showing the desktop colour that means "desktop up"
START_ATTEMPTS = 3  # a free port can be taken between finding it and QEMU binding it
WARM_SLOT_WAIT = 300.0  # another run's episode on the same warm slot finishes well within this


@dataclass
class EpisodeOptions:
    accel: Accel = "tcg"
    capture: str = "libvirt"  # or "vnc"
    wait_desktop: bool = True
    shell_timeout: float | None = None  # None: shell_wait_limit's choice
    desktop_timeout: float = DESKTOP_READY_TIMEOUT
    memory_mib: int | None = None


def shell_wait_limit(options: EpisodeOptions, guest: GuestProfile, *, restored: bool) -> float:
    """How long a start waits for the guest's shells: the caller's limit if it set one; after a
    restore, SHELL_READY_TIMEOUT (the guest was saved running); after a cold boot, the profile's."""
    if options.shell_timeout is not None:
        return options.shell_timeout
    return SHELL_READY_TIMEOUT if restored else guest.access.boot_shell_timeout


@dataclass
class Endpoints:
    """How to reach the VM from the host (printed by `cu-run vm up --json`)."""

    domain: str
    vnc: str
    vnc_password: str
    shell: ShellEndpoint

    def as_json(self) -> dict:
        return {"domain": self.domain, "vnc": self.vnc, "vnc_password": self.vnc_password,
                self.shell.kind: self.shell.details}

    def how_to_connect(self) -> str:
        return self.shell.how


@dataclass
class Timings:
    phases: dict[str, float] = field(default_factory=dict)

    def mark(self, phase: str, started: float) -> None:
        self.phases[phase] = round(time.monotonic() - started, 3)


class EpisodeVM:
    def __init__(
        self,
        host: Host,
        image: Image,
        settings: Settings,
        *,
        run_id: str,
        slot: int,
        options: EpisodeOptions | None = None,
        artifacts: Path | None = None,
        warm: WarmSlot | None = None,
        identity: SlotIdentity | None = None,
        warm_lock: SlotLock | None = None,
    ) -> None:
        """WARM: restore that slot's saved state instead of booting (the domain takes the slot's
        fixed name). IDENTITY: the name/UUID/MAC to boot under (default: the run's own slot).
        WARM_LOCK: WARM's lock, already taken by the caller; the episode releases it at teardown."""
        self.host = host
        self.image = image
        self.settings = settings
        self.options = options or EpisodeOptions()
        self.warm = warm
        self._warm_lock = warm_lock
        if warm is not None:
            identity = warm_identity(image, warm.state.slot)
        self.identity = identity or SlotIdentity(run_id, slot)
        self.run_id = run_id
        self.slot = slot
        self.artifacts = artifacts
        self.workdir = settings.episodes_dir / self.identity.name
        self.timings = Timings()
        self._shell: GuestShell | None = None
        self._admin_shell: GuestShell | None = None
        self._display: Display | None = None
        self._domain_spec: DomainSpec | None = None
        self._undo: list[tuple[str, Callable[[], object]]] = []
        self._started = False
        self.guest_stop: str | None = None  # set when the host saw the guest power itself off or reset
        self.endpoints: Endpoints | None = None
        # Fresh for every episode, set in the domain and handed only to what the run connects.
        self.vnc_password = new_vnc_password()

    # -- public handles

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def shell(self) -> GuestShell:
        if self._shell is None:
            raise InfraError(f"episode {self.name} has no shell (not started, or torn down)")
        return self._shell

    @property
    def admin_shell(self) -> GuestShell:
        """The privileged channel (root; the Windows verifier account): setup, listings, verifiers.
        Its account, keys and start-up files are out of the desktop user's reach."""
        if self._admin_shell is None:
            raise InfraError(f"episode {self.name} has no admin shell (not started, or torn down)")
        return self._admin_shell

    @property
    def desktop_user(self) -> DesktopUser:
        return self.image.manifest.desktop_user

    @property
    def display(self) -> Display:
        if self._display is None:
            raise InfraError(f"episode {self.name} has no display (not started, or torn down)")
        return self._display

    @property
    def started(self) -> bool:
        """start() has succeeded and the VM has not been torn down since."""
        return self._started

    @property
    def serial_log(self) -> Path:
        return self.workdir / "serial.log"

    @property
    def domain_xml(self) -> str:
        """The domain as the host defines it (libvirt's XML), once started; "" before."""
        return self.host.describe(self._domain_spec) if self._domain_spec is not None else ""

    # -- lifecycle

    def __enter__(self) -> EpisodeVM:
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self.artifacts is not None:
            self.capture_artifacts(self.artifacts)
        self.teardown(interrupted=exc_type is not None and issubclass(exc_type, KeyboardInterrupt))

    def start(self) -> None:
        try:
            self._start()
            self._started = True
        except BaseException as exc:
            if self.artifacts is not None:
                self.capture_artifacts(self.artifacts)
            self.teardown(interrupted=isinstance(exc, KeyboardInterrupt))
            raise

    def _start(self) -> None:
        manifest = self.image.manifest
        if (missing := manifest.admin_access_missing()) is not None:
            raise UsageError(f"image {self.image.name}: {missing}",
                             fix=f"rebuild it: cu-run image build {self.image.name} --force")
        if self.warm is not None:
            # The slot's fixed domain name and folder are this episode's only while it holds the slot.
            lock = self._warm_lock
            if lock is None:
                lock = self.warm.lock()
                lock.acquire(timeout=WARM_SLOT_WAIT)
            self._undo.append(("release warm slot", lock.release))
        owner = self._make_workdir()
        t = time.monotonic()
        self.host.create_overlay(self.warm.base if self.warm else self.image.disk, self.workdir / "overlay.qcow2")
        if manifest.firmware is not None:
            # Each episode boots from its own variable store: what Windows writes to NVRAM stays here.
            source = self.warm.nvram if self.warm else self.image.path(manifest.firmware.vars)
            shutil.copyfile(source, self.workdir / EPISODE_NVRAM_FILE)
        self.timings.mark("overlay", t)
        t = time.monotonic()
        shell_port = self._start_domain(owner)
        self.timings.mark("restore" if self.warm else "domain_start", t)
        self._connect(shell_port)
        t = time.monotonic()
        if self.warm is not None:
            # A restored guest was saved up and running: the admin channel's first command is
            # both the readiness check and the clock fix. The desktop user's shell connects
            # when first used (many agents never use it).
            self._wait_shell(self.admin_shell)
            self._set_clock()
        else:
            self._wait_shell(self.shell)
            self._wait_shell(self.admin_shell)  # an agent channel needs no login, but may come up later
        self.timings.mark("shell_ready", t)
        if self.options.wait_desktop:
            if self.warm is None or not self._desktop_still_shown():
                self._wait_desktop()
            self.timings.mark("desktop_ready", t)

    def _make_workdir(self) -> Owner:
        """The episode's own folder (0700), marked with who owns it so gc can judge it later."""
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        self.workdir.parent.mkdir(parents=True, exist_ok=True)
        self.workdir.mkdir(mode=0o700)  # the overlay, the NVRAM and the serial log are the run's alone
        self._undo.append(("remove episode folder", self._remove_workdir))
        owner = me()
        (self.workdir / EPISODE_OWNER_FILE).write_text(json.dumps({
            "run_id": self.run_id, "slot": self.slot, "domain": self.name,
            "owner_pid": owner.pid, "owner_start": owner.start,
        }))
        return owner

    def _remove_workdir(self) -> None:
        """Removes the episode's folder, or raises naming what stayed. Never silently: a folder
        left with its owner file gone is one gc cannot attribute. A second pass takes a file that
        appeared while the first one ran (QEMU's last writes as it exits)."""
        for _ in range(2):
            shutil.rmtree(self.workdir, ignore_errors=True)
            if not self.workdir.exists():
                return
        left = sorted(p.name for p in self.workdir.iterdir()) if self.workdir.is_dir() else []
        raise OSError(f"{self.workdir} could not be removed; it still holds {', '.join(left) or 'nothing'}")

    def _start_domain(self, owner: Owner) -> int:
        """Boots or restores the domain; returns the host port its shell is forwarded to."""
        self._undo.append(("destroy domain", lambda: self.host.destroy(self.name)))
        for attempt in range(1, START_ATTEMPTS + 1):
            shell_port = self.host.free_port()
            spec = episode_domain_spec(
                self.image, self.identity, self.workdir, self.options.accel, shell_port, owner,
                self.host.uri, self.options.memory_mib, run_id=self.run_id, vnc_password=self.vnc_password,
            )
            self._domain_spec = spec
            try:
                if self.warm is not None:
                    self.host.restore(self.warm.ram, spec)
                else:
                    self.host.start(spec)
                return shell_port
            except InfraError as exc:
                if attempt == START_ATTEMPTS or "forward" not in str(exc).lower():
                    raise
                log.warning("port %d was taken before QEMU bound it; retrying", shell_port)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _connect(self, shell_port: int) -> None:
        """The VM's screen and its two shells, each closed at teardown."""
        manifest = self.image.manifest
        vnc_host, vnc_port = self.host.vnc_endpoint(self.name)
        self._display = self.host.open_display(self.name, password=self.vnc_password,
                                               pointer_offset=manifest.pointer_offset,
                                               fast_capture=self.options.capture == "libvirt")
        self._undo.append(("close display", self._display.close))
        guest = manifest.guest
        forwarded = self.host.forward_address()
        self.endpoints = Endpoints(self.name, f"{vnc_host}:{vnc_port}", self.vnc_password,
                                   guest.access.endpoint(self.image, forwarded, shell_port))
        agent = ((lambda command, timeout: self.host.agent_command(self.name, command, timeout))
                 if self.settings.admin_channel == "agent" else None)
        shells = guest.access.open_shells(self.image, forwarded, shell_port, agent=agent)
        self._shell, self._admin_shell = shells.user, shells.admin
        self._undo.append(("close shell", self._shell.close))
        self._undo.append(("close admin shell", self._admin_shell.close))

    def _set_clock(self) -> None:
        """A restored guest wakes up at the time it was saved: give it the host's."""
        result = self.admin_shell.run(self.image.manifest.guest.scripts.clock_script(time.time()), timeout=20)
        if not result.ok:
            raise InfraError(f"{self.name}: could not set the restored guest's clock: {result.stderr.strip()}")

    def warm_up(self) -> None:
        """Runs what the episode's admin commands will run once, on nothing: for a VM made ready
        ahead of its episode (runner.runs.standby), whose guest code TCG has yet to translate."""
        warm_up = self.image.manifest.guest.part(WarmUp)
        if warm_up is None:
            return
        script = warm_up.script()
        t = time.monotonic()
        result = self.admin_shell.run(script, timeout=60)
        if not result.ok:
            raise InfraError(f"{self.name}: the warm-up command failed (exit {result.exit_code}): "
                             f"{result.stderr.strip()[-300:]}")
        self.timings.mark("warm_up", t)

    def still_ready(self) -> None:
        """For a VM that waited after its start: QEMU still runs and the admin channel answers."""
        self.check_alive()
        self.admin_shell.wait_ready(10.0)

    def save_state(self, ram: Path, disk: Path, nvram: Path | None = None) -> None:
        """Saves the running VM's RAM state to RAM and moves its disk overlay to DISK (and its
        UEFI variable store to NVRAM): a warm slot.

        The guest's buffers are synced first and the shell closed, so the state holds no open
        session and the saved disk is what the saved RAM believes is on it. The domain is gone after.
        """
        assert self._shell is not None
        # On the admin channel: flushing a volume needs an administrator on Windows.
        result = self.admin_shell.run(self.image.manifest.guest.scripts.sync_script(), timeout=60)
        if not result.ok:
            raise InfraError(f"{self.name}: sync before saving failed: {result.stderr.strip()}")
        self._shell.close()
        if self._admin_shell is not None:
            self._admin_shell.close()
        if self._display is not None:
            self._display.close()
        self.host.save(self.name, ram)
        shutil.move(self.workdir / "overlay.qcow2", disk)
        if nvram is not None and (self.workdir / EPISODE_NVRAM_FILE).exists():
            shutil.move(self.workdir / EPISODE_NVRAM_FILE, nvram)

    def _wait_shell(self, shell: GuestShell) -> None:
        limit = shell_wait_limit(self.options, self.image.manifest.guest, restored=self.warm is not None)
        deadline = time.monotonic() + limit
        while True:
            self.check_alive()
            try:
                shell.wait_ready(min(10.0, max(0.5, deadline - time.monotonic())))
                return
            except GuestUnreachable:
                if time.monotonic() >= deadline:
                    raise

    def _desktop_still_shown(self) -> bool:
        """After a restore: one capture. The warm state was saved with the desktop up and
        settled, so the desktop drawn again is enough; anything else gets the full wait."""
        return desktop_shown(self.display.screenshot(), self.image.manifest.desktop_color)

    def _wait_desktop(self) -> None:
        """Waits for the desktop to be drawn and settled: two captures alike, half a second apart."""
        deadline = time.monotonic() + self.options.desktop_timeout
        previous = b""
        check = self.image.manifest.desktop_ready_check
        while True:
            png = self.display.screenshot()
            if desktop_shown(png, self.image.manifest.desktop_color) and png == previous:
                if check is None or self.shell.run(check, timeout=20).exit_code == 0:
                    return
            previous = png
            if time.monotonic() >= deadline:
                raise InfraError(
                    f"{self.name}: the shell answers but the desktop did not appear within "
                    f"{self.options.desktop_timeout:.0f} s",
                    fix="look at the serial log and the last screenshot; /tmp/xsession.log in the guest",
                )
            self.check_alive()
            time.sleep(0.5)

    def check_alive(self) -> None:
        """Raises HostFault when the host sees the VM broken (QEMU gone or stopped, libvirt gone),
        GuestStopped when the guest powered itself off or reset."""
        fault = self.host_fault()
        if fault is not None:
            raise HostFault(fault, fix=f"see the serial log {self.serial_log}")
        if self.guest_stop is not None:
            raise GuestStopped(self.guest_stop, fix=f"see the serial log {self.serial_log}")

    def host_fault(self, settle: float = 0.0) -> str | None:
        """What the host itself can see is wrong with this VM, or None. Only such faults are the
        infrastructure's once the agent has run: nothing inside the guest can cause them.

        A VM that is gone because the guest shut itself down or reset is not one: the host's
        lifecycle events tell the two apart, and guest_stop then says what happened. SETTLE: how
        long a VM still running may take to stop (after an error, QEMU may be on its way out)."""
        try:
            cause = None
            if self.host.is_running(self.name):
                cause = self.host.stop_cause(self.name, wait=settle) if settle > 0 else None
            else:
                cause = self.host.stop_cause(self.name) or "host"
            if cause == "guest":
                self.guest_stop = (f"VM {self.name} stopped from inside the guest: it powered itself off or "
                                   "reset (a shutdown, reboot or SysRq from within)")
                return None
            if cause == "host":
                return f"VM {self.name} is not running any more (QEMU exited or was killed)"
            if self.host.qemu_stopped(self.name):
                return f"VM {self.name}'s QEMU is stopped (SIGSTOP): the guest is frozen"
        except InfraError as exc:
            return f"libvirt does not answer about {self.name}: {exc.message}"
        return None

    def capture_artifacts(self, dest: Path) -> None:
        """Keeps what explains a failure: serial log, last screenshot, domain XML. Never raises."""
        try:
            dest.mkdir(parents=True, exist_ok=True)
            if self.serial_log.exists():
                shutil.copy(self.serial_log, dest / "serial.log")
            if self._domain_spec is not None:
                (dest / "domain.xml").write_text(redacted(self.domain_xml))
            # A stopped QEMU does not answer its monitor: a screenshot would wait for ever.
            if self._display is not None and self.host_fault() is None:
                (dest / "last-screen.png").write_bytes(self._display.screenshot())
        except Exception as exc:  # noqa: BLE001 - artifacts are best effort; teardown must still run
            log.warning("could not keep all artifacts of %s: %s", self.name, exc)

    def kill(self) -> None:
        """Destroys the domain now, whoever is using it (a run that stops): calls blocked on the
        guest fail at once, and teardown still undoes the rest. Never raises: with libvirt gone
        too, the start or the teardown fails on its own, and gc finds what is left."""
        try:
            self.host.destroy(self.name)
        except InfraError:
            pass

    def teardown(self, interrupted: bool = False) -> list[str]:
        """Undoes everything start() did, newest first; returns what failed. Idempotent."""
        failed = []
        while self._undo:
            what, undo = self._undo.pop()
            try:
                undo()
            except BaseException as exc:  # noqa: BLE001 - one failed step must not skip the rest
                failed.append(f"{what}: {exc}")
                log.warning("teardown of %s: %s failed: %s", self.name, what, exc)
        self._shell = None
        self._admin_shell = None
        self._display = None
        self._started = False
        if interrupted:
            log.info("episode %s torn down after an interruption", self.name)
        return failed


def desktop_shown(png: bytes, desktop_color: str | None) -> bool:
    """Something is drawn (not one flat colour) and, if the image has one, its desktop colour shows."""
    if is_blank(png):
        return False
    return desktop_color is None or color_fraction(png, desktop_color) >= DESKTOP_SHARE


EPISODE_MIN_FREE_BYTES = 512 * 2**20  # an overlay grows with what the guest writes


def check_free_space(folder: Path, needed: int, what: str) -> None:
    """Raises InfraError, saying how much is free and what needs it, when FOLDER's filesystem
    has less than NEEDED bytes free: better one message before anything starts than a full
    disk under a running VM."""
    free = free_bytes(folder)
    if free < needed:
        raise InfraError(f"the filesystem of {folder} has {free / 2**20:.0f} MiB free; {what} needs at least "
                         f"{needed / 2**20:.0f} MiB",
                         fix="free some space there, or point --cache-dir (CU_RUN_HOME) at a larger filesystem")


VNC_PASSWORD_CHARS = string.ascii_letters + string.digits


def new_vnc_password() -> str:
    """Eight random characters: all that VNC's own authentication reads."""
    return "".join(secrets.choice(VNC_PASSWORD_CHARS) for _ in range(8))

