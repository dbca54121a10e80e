"""Which accelerator works here: a real probe, not the mere existence of /dev/kvm.

Nested KVM can open /dev/kvm, run a BIOS, and still hang a Linux kernel forever; so
the probe boots a real kernel under KVM and waits for it to print its banner on the
serial port. Under working KVM that takes well under a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from runner.choices import AccelChoice
from runner.errors import UsageError
from runner.hypervisor.domain_xml import Accel

QEMU = "qemu-system-x86_64"
PROBE_SECONDS = 12.0
BANNER = b"Linux version"


@dataclass(frozen=True)
class AccelProbe:
    kvm_usable: bool
    reason: str

    @property
    def accel(self) -> Accel:
        return "kvm" if self.kvm_usable else "tcg"


def probe_kvm(kernel: Path | None, *, timeout: float = PROBE_SECONDS) -> AccelProbe:
    """Boots KERNEL under KVM for up to TIMEOUT seconds and watches the serial port."""
    if not os.path.exists("/dev/kvm"):
        return AccelProbe(False, "/dev/kvm does not exist")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return AccelProbe(False, "/dev/kvm is not readable and writable by this user (join the kvm group)")
    if kernel is None or not kernel.is_file():
        return AccelProbe(False, "no kernel to probe with yet (build an image first); assuming KVM is unusable")
    with tempfile.TemporaryDirectory(prefix="cu-kvm-probe-") as tmp:
        serial = Path(tmp) / "serial.log"
        serial.touch()
        cmd = [
            QEMU, "-accel", "kvm", "-nodefaults", "-display", "none", "-no-reboot", "-m", "256",
            "-kernel", str(kernel), "-append", "console=ttyS0 earlyprintk=ttyS0 panic=-1",
            "-serial", f"file:{serial}",
        ]
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while time.monotonic() - started < timeout:
                if BANNER in serial.read_bytes():
                    took = time.monotonic() - started
                    return AccelProbe(True, f"a kernel booted under KVM and printed its banner in {took:.1f} s")
                if proc.poll() is not None:
                    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
                    last = err.splitlines()[-1] if err else proc.returncode
                    return AccelProbe(False, f"QEMU could not start under KVM: {last}")
                time.sleep(0.1)
            return AccelProbe(
                False, f"/dev/kvm opens but a kernel under KVM printed nothing in {timeout:.0f} s (nested KVM hangs)"
            )
        finally:
            proc.kill()
            proc.wait()


def cached_probe(cache_dir: Path, kernel: Path | None) -> AccelProbe:
    """The probe's answer, remembered until the host reboots or the probe kernel changes."""
    key = {"boot_id": _boot_id(), "kernel": str(kernel) if kernel else None,
           "kernel_mtime": kernel.stat().st_mtime if kernel and kernel.exists() else None}
    path = cache_dir / "accel-probe.json"
    try:
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return AccelProbe(**saved["probe"])
    except (OSError, ValueError, TypeError, KeyError):
        pass
    probe = probe_kvm(kernel)
    if kernel is not None:  # an answer without a kernel is a guess: do not remember it
        cache_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "probe": asdict(probe)}))
    return probe


def choose_accel(requested: AccelChoice, probe: AccelProbe) -> Accel:
    """--accel (made an AccelChoice at the edge: runner.choices) against what the probe found."""
    if requested == AccelChoice.auto:
        return probe.accel
    if requested == AccelChoice.tcg:
        return "tcg"
    if not probe.kvm_usable:
        raise UsageError(f"--accel kvm asked for, but KVM is unusable here: {probe.reason}",
                         fix="use --accel auto or --accel tcg")
    return "kvm"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"
