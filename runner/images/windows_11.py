"""`cu-run image build windows-11`: the air-gapped Packer build of the Windows 11 golden image.

Before packer starts, every input is checked and every problem reported at once (a
missing ISO, a checksum that does not match, too little disk, no packer, no qemu plugin
for a current packer, no OVMF, no xorriso or 7-Zip), so a two-hour build never dies at minute
90 over something a check could have seen. Then: a private copy of OVMF's variable
store, the virtio drivers extracted from the virtio-win ISO onto the setup CD, the answer
file with the password written in, and packer with the template in packer/windows-11/.
The result goes into the catalog with its manifest (profile windows, sha256, WinRM
credentials, firmware, screen, the evaluation licence's expiry).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from runner import __version__
from runner.images.catalog import MANIFEST, Catalog, Image, ImageManifest, sha256_file
from runner.profiles.manifest import Credentials, ScreenSize, UefiFirmware, WinRmAccess
from runner.config import DATA_ROOT
from runner.errors import InfraError, UsageError
from runner.profiles import windows
from runner.images.builders import BuildRequest, Builder, register_builder
from runner.images.linux_images import run_logged
from runner.display.vnc import VncDisplay
from runner.guest.winrm import WinRmShell
from runner.images.scratch import scratch_then_rename
from runner.images.windows_build_watch import BuildWatch, fetch_panther_logs
from runner.sockets import free_port
from runner.images.iso_files import INSTALL_HINT, find_seven_zip
from runner.images.windows_media import EditionChoice, choose_edition, iso_editions

TEMPLATE_DIR = DATA_ROOT / "packer" / "windows-11"
TEMPLATE = TEMPLATE_DIR / "windows-11.pkr.hcl"
DEFAULT_SEED = TEMPLATE_DIR / "evals-seed"
WINDOWS_11 = "windows-11"
OVMF_CANDIDATES = (("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"),
                   ("/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"),
                   ("/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"))
# Storage, SCSI, network, input and balloon drivers; w11 where the ISO has it, else w10.
VIRTIO_DRIVERS = ("viostor", "vioscsi", "NetKVM", "vioinput", "Balloon")
MIN_FREE_GIB = 40
# Windows Setup loads and installs the drivers of a folder of this name at the root of any drive,
# whatever letter the setup CD got; the answer file's DriverPaths name viostor in it on each letter
# the CD can get as well, so Setup finds the disk whichever way it searches.
DRIVERS_FOLDER = "$WinPEDriver$"
USER = "cu"  # the desktop user: autologon, and a standard user once built
VERIFIER_USER = "cu-verify"  # the administrator setup, listings and verifiers run as
SCREEN = ScreenSize(width=1280, height=800)
GUEST_AGENT = r"& 'C:\cu-run\guest-agent\invoke.ps1'"
# Ready once the autologon user's shell is up: explorer runs in an interactive session. The check
# runs as the desktop user, a standard user, for whom Get-Process -IncludeUserName throws; the
# session id needs no rights, and session 0 (services, WinRM) is never interactive. Anything
# unexpected is "not ready", never "ready".
DESKTOP_READY = ("try { $shells = @(Get-Process -Name explorer -ErrorAction Stop | Where-Object { $_.SessionId -gt 0 }) } "
                 "catch { exit 1 }; if ($shells.Count -gt 0) { exit 0 } else { exit 1 }")

Progress = Callable[[str], None]  # as in imagebuild


@dataclass(frozen=True)
class WindowsInputs:
    iso: Path
    virtio_iso: Path
    python_installer: Path
    evals_seed: Path = DEFAULT_SEED
    iso_sha256: str | None = None
    virtio_sha256: str | None = None
    python_sha256: str | None = None
    password: str | None = None
    licence_days: int = 90  # an evaluation ISO's licence; 0: not time-limited
    accel: str = "kvm"
    memory_mib: int = 4096
    cpus: int = 2
    disk_size: str = "64G"
    edition: str | None = None  # a name or edition id of the ISO's; None: its only one, or Pro
    product_key: str | None = None  # for an edition without a published setup key
    winrm_timeout: str = "2h"  # packer's wait for WinRM after the ISO boots


@dataclass(frozen=True)
class Tools:
    packer: str
    packer_version: tuple[int, int, int]
    ovmf_code: str
    ovmf_vars: str
    xorriso: str
    edition: EditionChoice


def preflight(inputs: WindowsInputs, catalog_root: Path, progress: Progress = lambda _l: None) -> Tools:
    """Checks everything the build needs; raises one UsageError listing every problem."""
    problems: list[str] = []
    for label, path, expected in (("Windows ISO (--iso)", inputs.iso, inputs.iso_sha256),
                                  ("virtio-win ISO (--virtio-iso)", inputs.virtio_iso, inputs.virtio_sha256),
                                  ("Python installer (--python-installer)", inputs.python_installer,
                                   inputs.python_sha256)):
        if not path.is_file():
            problems.append(f"{label}: {path} does not exist")
            continue
        if not os.access(path, os.R_OK):
            problems.append(f"{label}: {path} is not readable")
            continue
        if expected:
            progress(f"checking the sha256 of {path.name}")
            actual = sha256_file(path)
            if actual.lower() != expected.lower():
                problems.append(f"{label}: {path} has sha256 {actual}, expected {expected}")
    if inputs.python_installer.is_file() and not re.match(r"python-3\.13\.\d+-amd64\.exe$", inputs.python_installer.name):
        problems.append(f"Python installer: {inputs.python_installer.name} is not a python-3.13.x-amd64.exe")
    if not inputs.evals_seed.is_dir():
        problems.append(f"C:\\evals seed (--evals-seed): {inputs.evals_seed} is not a folder")
    catalog_root.mkdir(parents=True, exist_ok=True)
    free_gib = shutil.disk_usage(catalog_root).free / 2**30
    if free_gib < MIN_FREE_GIB:
        problems.append(f"disk: {free_gib:.0f} GiB free at {catalog_root}, the build needs {MIN_FREE_GIB} GiB")
    if inputs.accel not in ("kvm", "tcg"):
        problems.append(f"--accel must be kvm or tcg, not {inputs.accel!r}")
    if inputs.licence_days < 0:
        problems.append("--licence-days must be 0 (not time-limited) or more")

    packer = shutil.which("packer")
    version = (0, 0, 0)
    if packer is None:
        problems.append("packer: not on PATH (Debian: apt install packer; or a current Packer, see docs/windows.md)")
    else:
        version = packer_version(packer)
        if version >= (1, 7, 0) and not qemu_plugin_installed(packer):
            problems.append(f"packer {'.'.join(map(str, version))}: the qemu plugin is not installed "
                            "(air-gapped: copy packer-plugin-qemu into ~/.config/packer/plugins, see docs/windows.md)")
    ovmf = next(((c, v) for c, v in OVMF_CANDIDATES if Path(c).is_file() and Path(v).is_file()), None)
    if ovmf is None:
        problems.append("OVMF: no OVMF_CODE/OVMF_VARS pair found (apt install ovmf)")
    xorriso = shutil.which("xorriso")
    if xorriso is None:
        problems.append("xorriso: not on PATH; it extracts the virtio drivers and makes the setup CD "
                        "(apt install xorriso)")
    if shutil.which("qemu-system-x86_64") is None:
        problems.append("qemu-system-x86_64: not on PATH (apt install qemu-system-x86)")
    if not re.fullmatch(r"\d+[smh]", inputs.winrm_timeout):
        problems.append(f"--winrm-timeout {inputs.winrm_timeout!r} is not a duration like 90m or 2h")
    seven_zip = find_seven_zip()
    if seven_zip is None:
        problems.append(f"7-Zip: neither 7z nor 7zz is on PATH; it reads the Windows ISO's UDF tree ({INSTALL_HINT})")
    edition = None
    if seven_zip is not None and inputs.iso.is_file() and os.access(inputs.iso, os.R_OK):
        try:
            edition = choose_edition(iso_editions(seven_zip, inputs.iso), inputs.edition, inputs.product_key)
            progress(f"edition: {edition.edition.name} (index {edition.edition.index}; {edition.why})")
        except UsageError as exc:
            problems.append(f"Windows ISO (--iso): {exc.message}" + (f" ({exc.fix})" if exc.fix else ""))
    if problems:
        raise UsageError("cannot build windows-11:\n  - " + "\n  - ".join(problems),
                         fix="fix each problem above, then run the same command again")
    assert packer is not None and ovmf is not None and xorriso is not None and edition is not None
    return Tools(packer, version, ovmf[0], ovmf[1], xorriso, edition)


def packer_version(packer: str) -> tuple[int, int, int]:
    out = subprocess.run([packer, "version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", out)
    return tuple(int(g) for g in match.groups()) if match else (0, 0, 0)  # type: ignore[return-value]


def qemu_plugin_installed(packer: str) -> bool:
    """A current packer finds plugins in its plugin folders; an air-gapped host installs them by hand."""
    listed = subprocess.run([packer, "plugins", "installed"], capture_output=True, text=True, timeout=30)
    if listed.returncode == 0 and "qemu" in listed.stdout:
        return True
    folders = [Path(os.environ.get("PACKER_PLUGIN_PATH", "")), Path.home() / ".config/packer/plugins",
               Path.home() / ".packer.d/plugins"]
    return any(p.name.startswith("packer-plugin-qemu") for f in folders if f.is_dir() for p in f.rglob("*"))


def packer_vars(inputs: WindowsInputs, work: Path, tools_ovmf_code: str, password: str, iso_sha256: str,
                verifier_password: str, winrm_port: int = 5995) -> dict:
    """The -var values the template takes: one place, checked against the template by
    `packer validate` in the tests. WINRM_PORT: the host's end of the build VM's WinRM forward.
    (The VNC port is packer's choice, read from its output: packer 1.6.6 given a one-port VNC
    range passes display 0 to QEMU whatever the port.)"""
    return {
        "iso_path": str(inputs.iso.resolve()),
        "iso_sha256": iso_sha256,
        "autounattend": str(work / "autounattend.xml"),
        "drivers_dir": str(work / DRIVERS_FOLDER),
        "python_installer": str(inputs.python_installer.resolve()),
        "evals_seed_dir": str(inputs.evals_seed.resolve()),
        "ovmf_code": tools_ovmf_code,
        "ovmf_vars": str(work / "OVMF_VARS.fd"),
        "output_dir": str(work / "output"),
        "accelerator": inputs.accel,
        "cpu_model": "host" if inputs.accel == "kvm" else "max",
        "memory_mib": str(inputs.memory_mib),
        "cpus": str(inputs.cpus),
        "disk_size": inputs.disk_size,
        "admin_user": USER,
        "admin_password": password,
        "verifier_user": VERIFIER_USER,
        "verifier_password": verifier_password,
        "screen_width": str(SCREEN.width),
        "screen_height": str(SCREEN.height),
        "winrm_timeout": inputs.winrm_timeout,
        "winrm_host_port": str(winrm_port),
        "serial_log": str(work / "serial.log"),
    }


def packer_argv(packer: str, action: str, variables: dict) -> list[str]:
    argv = [packer, action]
    for name, value in variables.items():
        argv += ["-var", f"{name}={value}"]
    return argv + [str(TEMPLATE)]


def write_autounattend(dest: Path, password: str, edition: EditionChoice | None = None) -> None:
    """The answer file with the password, the edition's index and (multi-edition media) its key."""
    text = (TEMPLATE_DIR / "autounattend.xml").read_text()
    # The password sits in XML text: escape what XML would otherwise read as markup.
    escaped = password.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = text.replace("CU_PASSWORD_PLACEHOLDER", escaped)
    index = edition.edition.index if edition else 1
    text = text.replace("<Value>CU_IMAGE_INDEX</Value>", f"<Value>{index}</Value>")
    key = edition.product_key if edition else None
    text = text.replace("<!--CU_PRODUCT_KEY-->",
                        f"<ProductKey><Key>{key}</Key><WillShowUI>OnError</WillShowUI></ProductKey>" if key else "")
    dest.write_text(text)


def extract_drivers(xorriso: str, virtio_iso: Path, dest: Path) -> list[str]:
    """Copies each driver's Windows 11 amd64 folder (w10 where there is no w11) out of the
    virtio-win ISO into DEST/<driver>; returns what was found. The copies are made writable:
    files from an ISO come out read-only, and the build removes them when it ends."""
    found = []
    dest.mkdir(parents=True, exist_ok=True)
    for driver in VIRTIO_DRIVERS:
        for version in ("w11", "w10"):
            target = dest / driver
            done = subprocess.run([xorriso, "-osirrox", "on", "-indev", str(virtio_iso), "-extract",
                                   f"/{driver}/{version}/amd64", str(target)], capture_output=True, text=True)
            if done.returncode == 0 and target.is_dir() and any(target.iterdir()):
                _make_writable(target)
                found.append(f"{driver}/{version}")
                break
            _make_writable(target)
            shutil.rmtree(target, ignore_errors=True)
    if not any(f.startswith(("viostor", "vioscsi")) for f in found) or not any(f.startswith("NetKVM") for f in found):
        raise UsageError(f"{virtio_iso} holds no Windows 10/11 amd64 storage and network drivers "
                         f"(found: {', '.join(found) or 'none'})",
                         fix="use a virtio-win ISO from the virtio-win project (0.1.240 or later)")
    return found


def _make_writable(tree: Path) -> None:
    if not tree.exists():
        return
    for path in [tree, *tree.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o700 if path.is_dir() else path.stat().st_mode | 0o600)


def virtio_layout(xorriso: str, virtio_iso: Path) -> dict[str, str | None]:
    """Which Windows version folder (w11, else w10) each driver of VIRTIO_DRIVERS has for amd64
    on the virtio-win ISO; None where it has neither. One listing, nothing extracted."""
    listed = subprocess.run([xorriso, "-indev", str(virtio_iso), "-find", "/", "-type", "d", "-name", "amd64"],
                            capture_output=True, text=True, timeout=120).stdout
    folders = {line.strip().strip("'") for line in listed.splitlines()}
    return {driver: next((v for v in ("w11", "w10") if f"/{driver}/{v}/amd64" in folders), None)
            for driver in VIRTIO_DRIVERS}


def template_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in TEMPLATE_DIR.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(TEMPLATE_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def build_windows_image(catalog: Catalog, name: str, inputs: WindowsInputs, *, progress: Progress = print) -> Image:
    tools = preflight(inputs, catalog.root, progress)
    password = inputs.password or secrets.token_urlsafe(12)
    iso_sha256 = inputs.iso_sha256 or _hash_with_progress(inputs.iso, progress)
    started = time.monotonic()
    with scratch_then_rename(catalog.folder(name), catalog.root / f".build-{name}-{os.getpid()}") as work:
        _build_into(work, name, inputs, tools, password, iso_sha256, started, progress)
    return catalog.get(name)


def _build_into(work: Path, name: str, inputs: WindowsInputs, tools: Tools, password: str, iso_sha256: str,
                started: float, progress: Progress) -> None:
    """Everything of the Windows build that happens inside its scratch folder."""
    shutil.copyfile(tools.ovmf_vars, work / "OVMF_VARS.fd")
    progress("extracting the virtio drivers")
    drivers = extract_drivers(tools.xorriso, inputs.virtio_iso, work / DRIVERS_FOLDER)
    progress(f"drivers: {', '.join(drivers)}")
    write_autounattend(work / "autounattend.xml", password, tools.edition)
    verifier_password = secrets.token_urlsafe(18)
    winrm_port = free_port()
    variables = packer_vars(inputs, work, tools.ovmf_code, password, iso_sha256, verifier_password, winrm_port)
    watch = BuildWatch(work, progress, open_screen=lambda port: VncDisplay("127.0.0.1", port),
                       fetch_panther=lambda dest: fetch_panther_logs(
                           WinRmShell("127.0.0.1", winrm_port, USER, password), dest))
    progress(f"packer: WinRM is waited for up to {inputs.winrm_timeout} (--winrm-timeout); the build VM's screen "
             "is captured every minute")
    try:
        _run_packer(packer_argv(tools.packer, "build", variables), work, watch)
    except BaseException:
        watch.finish()
        kept = watch.keep(work.parent / f".build-{name}.failed", work / "packer.log")
        progress(f"kept what shows why in {kept}: packer.log, screens/ (one a minute), serial.log, panther/")
        raise
    watch.finish()
    disk = work / "output" / "disk.qcow2"
    if not disk.is_file():
        raise InfraError(f"packer finished but left no disk at {disk}", fix=f"read {work / 'packer.log'}")
    shutil.move(disk, work / "disk.qcow2")
    shutil.rmtree(work / "output", ignore_errors=True)
    progress("hashing the golden disk")
    built_at = datetime.now(UTC)
    manifest = ImageManifest(
        name=name, profile=windows.PROFILE_NAME, disk="disk.qcow2", disk_sha256=sha256_file(work / "disk.qcow2"),
        disk_bytes=(work / "disk.qcow2").stat().st_size,
        firmware=UefiFirmware(code=tools.ovmf_code, vars="OVMF_VARS.fd"),
        screen=SCREEN, desktop_ready_check=DESKTOP_READY, guest_agent=GUEST_AGENT,
        memory_mib=inputs.memory_mib, vcpus=inputs.cpus, credentials=Credentials(user=USER, password=password),
        winrm=WinRmAccess(user=USER, password=password, admin_user=VERIFIER_USER,
                          admin_password=verifier_password),
        licence_expires=(built_at.date() + timedelta(days=inputs.licence_days)) if inputs.licence_days else None,
        built_at=built_at, build_seconds=round(time.monotonic() - started, 1),
        builder=f"cu-run {__version__} packer template {template_hash()}",
    )
    for scratch in (DRIVERS_FOLDER, "autounattend.xml"):  # the answer file holds the password
        target = work / scratch
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    (work / MANIFEST).write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
    (work / MANIFEST).chmod(0o600)
    (work / "disk.qcow2").chmod(0o444)


def _hash_with_progress(path: Path, progress: Progress) -> str:
    progress(f"hashing {path.name} ({path.stat().st_size / 2**30:.1f} GiB)")
    return sha256_file(path)


def _run_packer(argv: list[str], work: Path, watch: BuildWatch) -> None:
    # The log may be read by others than the manifest: no password goes into it.
    shown = [a.split("=", 1)[0] + "=***" if a.split("=", 1)[0].endswith("password") else a for a in argv]
    code, tail = run_logged(argv, work / "packer.log", watch.line, watch.progress, cwd=TEMPLATE_DIR, keep=15,
                            env=dict(os.environ, PACKER_NO_COLOR="1", CHECKPOINT_DISABLE="1",
                                     PACKER_CACHE_DIR=str(work / "packer_cache")),
                            header=" ".join(shown) + "\n")
    if code != 0:
        raise InfraError(f"packer build failed (exit {code}); last lines:\n  " + "\n  ".join(tail),
                         fix="what shows why is kept beside the catalog in .build-<image>.failed/")


def licence_warning(image: Image, today: date | None = None) -> str | None:
    """A line to show when IMAGE's evaluation licence ends within 14 days (or has ended)."""
    expires = image.manifest.licence_expires
    if expires is None:
        return None
    days = (expires - (today or date.today())).days
    if days < 0:
        return f"image {image.name}: its Windows evaluation licence ended on {expires}; rebuild it"
    if days < 14:
        return f"image {image.name}: its Windows evaluation licence ends in {days} days ({expires}); rebuild it soon"
    return None


def build_windows(request: BuildRequest) -> tuple[Image, bool]:
    """`cu-run image build windows-11`: from the lab's own media (--iso, --virtio-iso,
    --python-installer; docs/windows.md), unless the catalog has it and no rebuild is asked."""
    options = request.options
    missing = [flag for flag, key in (("--iso", "iso"), ("--virtio-iso", "virtio_iso"),
                                      ("--python-installer", "python_installer")) if options.get(key) is None]
    if missing:
        raise UsageError(f"building {WINDOWS_11} needs {', '.join(missing)}",
                         fix="docs/windows.md says where each file comes from")
    existing = request.catalog.find(WINDOWS_11)
    if existing is not None and not request.force:
        return existing, False
    inputs = WindowsInputs(
        iso=options["iso"], virtio_iso=options["virtio_iso"], python_installer=options["python_installer"],
        evals_seed=options.get("evals_seed") or DEFAULT_SEED, iso_sha256=options.get("iso_sha256"),
        virtio_sha256=options.get("virtio_sha256"), python_sha256=options.get("python_sha256"),
        licence_days=options.get("licence_days", 90), accel=request.accel(), edition=options.get("edition"),
        product_key=options.get("product_key"), winrm_timeout=options.get("winrm_timeout") or "2h")
    return build_windows_image(request.catalog, WINDOWS_11, inputs, progress=request.progress), True


WINDOWS_BUILDER = register_builder(Builder(WINDOWS_11, build_windows, "Packer, from a lab's own Windows 11 media"))
