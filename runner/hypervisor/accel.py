"""Which accelerator works here: a real probe, not the mere existence of /dev/kvm.

Nested KVM can open /dev/kvm, run a BIOS, and still never get a kernel going: where /dev/kvm is
PVM, a guest's ring-0 code is emulated and a kernel's decompressor takes minutes. So the probe
boots cu-run's own boot sector (runner.hypervisor.probe_image: long mode, paging, timer
interrupts, memory, a count) under KVM and waits for its banner on the serial port; where KVM
works that takes well under a second. It reads no kernel: the host's is 0600 root on Ubuntu.

Only an answer about KVM itself is cached: the sector ran under KVM, or it did not while the same
sector ran under TCG. An answer that failed for another reason (no /dev/kvm for this user, no
QEMU, a sector that runs nowhere) is worked out again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from runner.choices import AccelChoice
from runner.errors import UsageError
from runner.hypervisor import probe_image
from runner.hypervisor.domain_xml import Accel

QEMU = "qemu-system-x86_64"
KVM_DEVICE = Path("/dev/kvm")
PROBE_SECONDS = 8.0  # under KVM; QEMU, SeaBIOS and the sector's work take under a second where KVM works
CONTROL_SECONDS = 30.0  # under TCG; about 0.3 s on a 2-core host
CACHE_FILE = "accel-probe.json"


@dataclass(frozen=True)
class AccelProbe:
    kvm_usable: bool
    reason: str
    about_kvm: bool = False  # KVM's own answer (it ran the sector, or failed where TCG did not): cached
    device_ok: bool = True  # /dev/kvm exists and this user may open it, so --accel kvm can try

    @property
    def accel(self) -> Accel:
        return "kvm" if self.kvm_usable else "tcg"


@dataclass(frozen=True)
class Boot:
    """One boot of the probe's sector."""

    banner: bool
    seconds: float
    steps: str  # the step letters it printed (probe_image.STEPS)
    qemu_error: str | None  # when QEMU exited by itself: its last line on stderr, or that the guest reset

    def progress(self) -> str:
        done = [probe_image.STEPS[s] for s in self.steps if s in probe_image.STEPS]
        return "it " + ", ".join(done) if done else "it printed nothing"


def device_problem() -> str | None:
    """Why --accel kvm cannot even be tried by this user, or None."""
    if not KVM_DEVICE.exists():
        return f"{KVM_DEVICE} does not exist"
    if not os.access(KVM_DEVICE, os.R_OK | os.W_OK):
        return f"{KVM_DEVICE} is not readable and writable by this user (join the kvm group)"
    return None


def boot_probe(accel: Accel, timeout: float, image: bytes) -> Boot:
    """Boots IMAGE (a boot sector) under ACCEL for up to TIMEOUT seconds, watching the serial port."""
    with tempfile.TemporaryDirectory(prefix="cu-kvm-probe-") as tmp:
        disk, serial, errors = Path(tmp) / "probe.img", Path(tmp) / "serial.log", Path(tmp) / "qemu.err"
        disk.write_bytes(image)
        serial.touch()
        cmd = [QEMU, "-accel", accel, "-nodefaults", "-display", "none", "-no-reboot", "-m", "64",
               "-drive", f"file={disk},format=raw,if=ide", "-serial", f"file:{serial}"]
        started = time.monotonic()
        with errors.open("wb") as stderr:  # a file, not a pipe: a QEMU that talks a lot must not block on it
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            while True:
                out, took, exited = serial.read_bytes(), time.monotonic() - started, proc.poll() is not None
                if probe_image.BANNER in out or took > timeout or exited:
                    break
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.wait()
        steps = out.split(probe_image.BANNER)[0].decode("ascii", errors="replace")
        return Boot(probe_image.BANNER in out, took, steps, _exit_note(errors, proc.returncode) if exited else None)


def _exit_note(errors: Path, returncode: int) -> str:
    lines = errors.read_text(errors="replace").strip().splitlines()
    if lines:
        return lines[-1]
    # -no-reboot: a guest that resets (a triple fault) ends QEMU with status 0
    return "the guest reset" if returncode == 0 else f"exit status {returncode}"


def probe_kvm(*, image: bytes | None = None) -> AccelProbe:
    """Boots the probe's sector under KVM; if it does not finish, under TCG too, so that a sector or
    a QEMU that runs nowhere is not taken for broken KVM. IMAGE: a test's own sector instead."""
    image = image if image is not None else probe_image.boot_sector()
    problem = device_problem()
    if problem:
        return AccelProbe(False, problem, device_ok=False)
    if shutil.which(QEMU) is None:
        return AccelProbe(False, f"{QEMU} is not installed, so KVM could not be probed")
    kvm = boot_probe("kvm", PROBE_SECONDS, image)
    if kvm.banner:
        return AccelProbe(True, f"cu-run's probe guest ran under KVM in {kvm.seconds:.1f} s", about_kvm=True)
    tcg = boot_probe("tcg", CONTROL_SECONDS, image)
    if not tcg.banner:
        return AccelProbe(False, f"the probe guest did not run under TCG either ({_stopped(tcg, CONTROL_SECONDS)}), "
                                 "so whether KVM works is unknown")
    return AccelProbe(False, f"under KVM {_stopped(kvm, PROBE_SECONDS)}, where under TCG it ran in {tcg.seconds:.1f} s"
                             + ("" if kvm.qemu_error else ": nested KVM hangs or crawls here"), about_kvm=True)


def _stopped(boot: Boot, timeout: float) -> str:
    if boot.qemu_error:
        return f"QEMU stopped ({boot.qemu_error}); {boot.progress()}"
    return f"the probe guest did not finish in {timeout:.0f} s ({boot.progress()})"


def cached_probe(cache_dir: Path) -> AccelProbe:
    """The probe's answer, remembered until the host reboots, QEMU changes or the sector does."""
    problem = device_problem()  # before the cache: a user who may not open /dev/kvm gets no saved "works"
    if problem:
        return AccelProbe(False, problem, device_ok=False)
    path = cache_dir / CACHE_FILE
    key = _cache_key()
    try:
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            probe = AccelProbe(**saved["probe"])
            if probe.about_kvm:
                return probe
    except (OSError, ValueError, TypeError, KeyError):
        pass
    probe = probe_kvm()
    if probe.about_kvm:
        cache_dir.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{CACHE_FILE}.{os.getpid()}")
        part.write_text(json.dumps({"key": key, "probe": asdict(probe)}))
        part.replace(path)
    return probe


def choose_accel(requested: AccelChoice, probe: AccelProbe) -> Accel:
    """--accel (made an AccelChoice at the edge: runner.choices) against what the probe found.
    --accel kvm tries KVM whatever the probe said (forced_kvm_warning says so), unless there is no
    /dev/kvm this user can open."""
    if requested == AccelChoice.auto:
        return probe.accel
    if requested == AccelChoice.tcg:
        return "tcg"
    if not probe.device_ok:
        raise UsageError(f"--accel kvm asked for, but {probe.reason}",
                         fix="use --accel auto or --accel tcg; for KVM, enable VT-x/AMD-V and load kvm_intel or kvm_amd")
    return "kvm"


def forced_kvm_warning(requested: AccelChoice, probe: AccelProbe) -> str | None:
    """What a user who forced KVM against the probe should hear, or None."""
    if requested == AccelChoice.kvm and not probe.kvm_usable:
        return f"--accel kvm: using KVM as asked, though the probe found it unusable: {probe.reason}"
    return None


def _cache_key() -> dict:
    qemu = shutil.which(QEMU)
    return {"boot_id": _boot_id(), "probe": _sector_digest(),
            "qemu": [qemu, os.stat(qemu).st_mtime if qemu else None]}


@cache
def _sector_digest() -> str:
    return hashlib.sha256(probe_image.boot_sector()).hexdigest()[:16]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"
