"""`cu-run doctor`: is this host ready to run episodes, and if not, what to do."""

from __future__ import annotations

import grp
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.images.catalog import Catalog
from runner.config import Settings, free_bytes
from runner.errors import CuRunError
from runner.hypervisor.accel import QEMU, cached_probe
from runner.hypervisor.connect import connect_host
from runner.images.linux_images import LINUX_TEST, REQUIRED_TOOLS
from runner.vm.admission import available_mib, per_vm_mib, vms_that_fit

Status = Literal["ok", "warn", "fail"]
MIN_FREE_GIB = 2.0
WANT_FREE_GIB = 10.0


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


def run_checks(settings: Settings, windows_iso: Path | None = None, virtio_iso: Path | None = None) -> list[Check]:
    accel = _accel(settings)
    checks = [_qemu(), _libvirt(settings.libvirt_uri), _kvm_device(), accel, _disk(settings.cache_dir)]
    checks += [_catalog(settings), _build_tools()]
    checks += _capacity(settings, "kvm" if accel.status == "ok" else "tcg")
    checks += _licences(settings)
    checks += windows_checks(windows_iso, virtio_iso)
    return checks


def windows_checks(windows_iso: Path | None, virtio_iso: Path | None) -> list[Check]:
    """What a Windows build needs from this host and its media: OVMF (and whether its secure-boot
    variable store is there), no TPM needed, and, when given, the ISO's editions and the
    virtio-win ISO's Windows 11 drivers."""
    from runner.images.windows_11 import OVMF_CANDIDATES, VIRTIO_DRIVERS, virtio_layout
    from runner.images.iso_files import INSTALL_HINT, find_seven_zip
    from runner.images.windows_media import choose_edition, iso_editions

    checks = []
    ovmf = next(((c, v) for c, v in OVMF_CANDIDATES if Path(c).is_file() and Path(v).is_file()), None)
    if ovmf is None:
        checks.append(Check("windows: OVMF", "fail", "no OVMF_CODE/OVMF_VARS pair found", "apt install ovmf"))
    else:
        secure = [p for p in ("/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "/usr/share/OVMF/OVMF_VARS.ms.fd") if Path(p).is_file()]
        checks.append(Check("windows: OVMF", "ok", f"{ovmf[0]} with {ovmf[1]}; secure-boot variables "
                            f"{'at ' + secure[0] if secure else 'absent'} (not needed: the answer file bypasses the "
                            "Secure Boot check)"))
    checks.append(Check("windows: TPM", "ok", "no swtpm needed: the answer file bypasses the TPM check (LabConfig), "
                        "so clones carry no TPM state"))
    for flag, given in (("--windows-iso", windows_iso), ("--virtio-iso", virtio_iso)):
        if given is not None and not given.is_file():
            checks.append(Check("windows: media", "fail", f"{flag} {given} does not exist", "give the ISO's path"))
    windows_iso = windows_iso if windows_iso is not None and windows_iso.is_file() else None
    virtio_iso = virtio_iso if virtio_iso is not None and virtio_iso.is_file() else None
    xorriso = shutil.which("xorriso")
    if virtio_iso and xorriso is None:
        checks.append(Check("windows: media", "fail", "xorriso is missing: it reads the virtio-win ISO",
                            "apt install xorriso"))
    seven_zip = find_seven_zip()
    if windows_iso and seven_zip is None:
        checks.append(Check("windows: media", "fail", "7-Zip is missing: it reads the Windows ISO's UDF tree",
                            INSTALL_HINT))
    if windows_iso is not None and seven_zip is not None:
        try:
            editions = iso_editions(seven_zip, windows_iso)
            listed = "; ".join(f"{e.index}: {e.name}" for e in editions)
            try:
                chosen = choose_edition(editions, None, None)
                checks.append(Check("windows: ISO editions", "ok", f"{listed}; the build installs {chosen.edition.name} "
                                    f"({chosen.why})"))
            except CuRunError as exc:
                checks.append(Check("windows: ISO editions", "warn", f"{listed}: {exc.message}", exc.fix or ""))
        except CuRunError as exc:
            checks.append(Check("windows: ISO editions", "fail", exc.message,
                                "give the Windows 11 installation ISO as downloaded from Microsoft; a re-mastered "
                                "one must keep sources/install.wim in its UDF or ISO 9660 tree"))
    if virtio_iso is not None and xorriso is not None:
        layout = virtio_layout(xorriso, virtio_iso)
        shown = ", ".join(f"{d}/{v or 'none'}" for d, v in layout.items())
        essential = ("viostor", "NetKVM")
        if any(layout[d] is None for d in essential):
            checks.append(Check("windows: virtio drivers", "fail", shown,
                                "use a virtio-win ISO (0.1.240 or later) with viostor and NetKVM for w11/amd64"))
        elif any(v != "w11" for v in layout.values()) or len(layout) != len(VIRTIO_DRIVERS):
            checks.append(Check("windows: virtio drivers", "warn", shown, "a newer virtio-win ISO has w11 drivers"))
        else:
            checks.append(Check("windows: virtio drivers", "ok", shown))
    return checks


def _licences(settings: Settings) -> list[Check]:
    """Windows evaluation images stop working when their licence ends: say so 14 days ahead."""
    from runner.images.windows_11 import licence_warning

    try:
        images = Catalog(settings.images_dir).images()
    except CuRunError:
        return []  # _catalog reports the broken manifest
    checks = []
    for image in images:
        if image.manifest.licence_expires is None:
            continue
        warning = licence_warning(image)
        checks.append(Check(f"licence {image.name}", "warn" if warning else "ok",
                            warning or f"evaluation licence until {image.manifest.licence_expires}",
                            f"cu-run image build {image.name} --force (with the same inputs)" if warning else ""))
    return checks


def _capacity(settings: Settings, accel: str, cores: int | None = None) -> list[Check]:
    """How many VMs of each image this host holds at once: by memory (runs cap --vm-pool to it), and
    by cores (each VM's one vCPU wants a core while it works; more VMs than cores share them)."""
    try:
        images = Catalog(settings.images_dir).images()
        available = available_mib()
    except (CuRunError, OSError, ValueError):
        return []
    cores = cores or os.cpu_count() or 1
    checks = []
    for image in images:
        fit = vms_that_fit(image.manifest.memory_mib, accel, available)
        detail = (f"memory holds {fit} VMs ({per_vm_mib(image.manifest.memory_mib, accel)} MiB each under "
                  f"{accel.upper()}, {available} MiB available); {cores} cores run {min(fit, cores)} at full speed")
        if fit < 1:
            checks.append(Check(f"capacity {image.name}", "fail", detail, "free memory, or give the image less (memory_mib)"))
        elif fit > cores:
            checks.append(Check(f"capacity {image.name}", "ok", detail,
                                f"a --vm-pool over {cores} runs, but its VMs share the cores: each is slower"))
        else:
            checks.append(Check(f"capacity {image.name}", "ok", detail))
    return checks


def _qemu() -> Check:
    path = shutil.which(QEMU)
    if not path or not shutil.which("qemu-img"):
        return Check("qemu", "fail", f"{QEMU} or qemu-img not found", "apt install qemu-system-x86 qemu-utils")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return Check("qemu", "ok", f"{path}: {version}")


def _libvirt(uri: str) -> Check:
    try:
        host = connect_host(uri)
    except CuRunError as exc:
        return Check("libvirt", "fail", f"{uri}: {exc.message}", exc.fix or "")
    try:
        v = host.versions()
    finally:
        host.close()
    detail = f"{uri}: libvirt {v['libvirt']}, QEMU {v['hypervisor']}"
    if uri.startswith("qemu:///system") and not Path("/run/libvirt/virtlogd-sock").exists():
        return Check("libvirt", "fail", detail + "; virtlogd is not running (domains cannot start)",
                     "start it: virtlogd -d (or scripts/setup-host.sh)")
    return Check("libvirt", "ok", detail)


def _kvm_device() -> Check:
    # libvirt re-probes QEMU's capabilities on every domain start (~60 s) when its QEMU
    # user cannot open /dev/kvm: udev normally makes it root:kvm 0660, containers do not.
    kvm = Path("/dev/kvm")
    if not kvm.exists():
        return Check("/dev/kvm", "ok", "absent: TCG only, nothing to fix here")
    mode = kvm.stat().st_mode & 0o777
    try:
        group = grp.getgrgid(kvm.stat().st_gid).gr_name
    except KeyError:
        group = str(kvm.stat().st_gid)
    detail = f"{group}, mode {mode:o}"
    if group != "kvm" or mode & 0o060 != 0o060:
        return Check("/dev/kvm", "warn", detail + ": libvirt's QEMU user cannot open it, every VM start is ~60 s slower",
                     "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm (scripts/setup-host.sh does this)")
    return Check("/dev/kvm", "ok", detail)


def _accel(settings: Settings) -> Check:
    probe = cached_probe(settings.cache_dir)
    if probe.kvm_usable:
        return Check("accelerator", "ok", f"KVM usable: {probe.reason}")
    return Check("accelerator", "warn", f"KVM unusable, TCG will be used (slower): {probe.reason}",
                 "none needed; on bare metal enable VT-x/AMD-V and load kvm_intel/kvm_amd")


def _disk(cache_dir: Path) -> Check:
    free = free_bytes(cache_dir) / 2**30
    detail = f"{free:.1f} GiB free at {cache_dir}"
    if free < MIN_FREE_GIB:
        return Check("disk", "fail", detail,
                     f"free space or move the cache: CU_RUN_HOME=/bigger/disk (need {MIN_FREE_GIB:.0f}+ GiB)")
    if free < WANT_FREE_GIB:
        return Check("disk", "warn", detail, f"images and overlays grow: {WANT_FREE_GIB:.0f}+ GiB is comfortable")
    return Check("disk", "ok", detail)


def _catalog(settings: Settings) -> Check:
    catalog = Catalog(settings.images_dir)
    names = [i.name for i in catalog.images()]
    if LINUX_TEST not in names:
        return Check("images", "fail", f"no {LINUX_TEST} image in {settings.images_dir}",
                     f"build it: cu-run image build {LINUX_TEST}")
    if unreadable := catalog.unreadable():
        return Check("images", "warn", "; ".join(exc.message.splitlines()[0] for exc in unreadable),
                     "; ".join(exc.fix or "" for exc in unreadable))
    return Check("images", "ok", f"{settings.images_dir}: {', '.join(names)}")


def _build_tools() -> Check:
    missing = [f"{tool} ({pkg})" for tool, pkg in REQUIRED_TOOLS.items() if not shutil.which(tool)]
    if missing:
        return Check("image tools", "warn", "missing: " + ", ".join(missing), "apt install " +
                     " ".join(sorted({REQUIRED_TOOLS[m.split()[0]] for m in missing})))
    if os.geteuid() != 0:
        return Check("image tools", "warn", "present, but building linux-test needs root", "build it as root")
    return Check("image tools", "ok", "mmdebstrap, mkfs.ext4, qemu-img, ssh-keygen")
