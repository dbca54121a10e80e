"""Builds the built-in Linux guests into the image catalog: linux-test, the small desktop every
part is exercised on, and linux-desktop, the benchmark apps' desktop (docs/images.md).

A recipe (images/<name>/, with what both share in images/common/) is shell: mmdebstrap,
mkfs.ext4 -d, qemu-img. This module owns what is around it: the keys, the lock against two
builds at once, the manifest, and the atomic move into the catalog so a failed build leaves
nothing half made.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from runner import __version__
from runner.images.catalog import MANIFEST, Catalog, Image, ImageManifest, sha256_file
from runner.profiles.manifest import Credentials, DirectBoot, ScreenSize, SshAccess
from runner.config import DATA_ROOT, private_dir, recipe_dir
from runner.errors import InfraError, UsageError
from runner.profiles import linux
from runner.images.builders import Builder, register_builder
from runner.images.scratch import scratch_then_rename

LINUX_TEST = "linux-test"
LINUX_DESKTOP = "linux-desktop"
# No console on tty0: drawing boot messages on the VGA text console is slow under TCG.
# net.ifnames=0 names the NIC eth0, which cu-net.service configures. audit=1: every process has
# an audit context from the first, so one started before auditd (the desktop's shells) cannot
# run a program unlogged (etc/audit/rules.d/cu-run.rules); the backlog holds the boot's records
# until auditd reads them.
KERNEL_CMDLINE = ("root=/dev/vda rw console=ttyS0,115200 net.ifnames=0 mitigations=off random.trust_cpu=on "
                  "audit=1 audit_backlog_limit=8192")


@dataclass(frozen=True)
class LinuxRecipe:
    """What the manifest of a built-in Linux guest says beyond what its recipe's files do."""

    name: str
    user: str  # the desktop user
    password: str
    screen: ScreenSize
    desktop_color: str  # the desktop's solid background: "the desktop is up" in a screenshot
    desktop_ready_check: str  # a command that succeeds once the desktop takes input
    memory_mib: int
    pointer_offset: int = 0
    warm_apps: str | None = None  # images/<name>/rootfs/usr/local/bin/cu-warm-apps


RECIPES = {
    LINUX_TEST: LinuxRecipe(
        LINUX_TEST, user="cu", password="cu", screen=ScreenSize(width=1280, height=800),
        desktop_color="#1f6f8b",  # images/linux-test/rootfs/home/cu/.xinitrc
        # Ready once jwm has started the terminal. By class: bash retitles the xterm to user@host: dir.
        desktop_ready_check="DISPLAY=:0 xdotool search --onlyvisible --classname '^xterm$' >/dev/null",
        memory_mib=1024, pointer_offset=1),  # measured: without it every click lands at (x-1, y-1)
    LINUX_DESKTOP: LinuxRecipe(
        LINUX_DESKTOP, user="user", password="password",  # OSWorld's account: its tasks name /home/user
        screen=ScreenSize(width=1920, height=1080),  # OSWorld's screen
        desktop_color="#2e3440",  # images/linux-desktop/rootfs/home/user/.config/xfce4/...xfce4-desktop.xml
        desktop_ready_check="DISPLAY=:0 xdotool search --onlyvisible --class '^Xfce4-panel$' >/dev/null",
        memory_mib=2560, pointer_offset=1, warm_apps="DISPLAY=:0 /usr/local/bin/cu-warm-apps"),
}
BUILT_IN = tuple(RECIPES)
# customize.sh installs guest_agent/linux/cu_guest_agent.py here; it talks to the user's X
# session and (through its session bus) to AT-SPI.
GUEST_AGENT_DIR = DATA_ROOT / "guest_agent" / "linux"
GUEST_AGENT_PROGRAM = "cu_guest_agent.py"
GUEST_AGENT_COMMAND = "DISPLAY=:0 /usr/local/bin/cu-guest-agent"
# Bumped when what a build writes around the recipe changes, so cached images are rebuilt:
# 2 = the admin key, a 0700 keys folder and a 0600 manifest.
BUILD_LAYOUT = "2"
REQUIRED_TOOLS = {
    "mmdebstrap": "mmdebstrap",
    "mkfs.ext4": "e2fsprogs",
    "qemu-img": "qemu-utils",
    "ssh-keygen": "openssh-client",
}

Progress = Callable[[str], None]


def build_image(catalog: Catalog, name: str, *, force: bool = False, progress: Progress = print) -> tuple[Image, bool]:
    """Builds NAME into the catalog unless it is there already.

    Returns the image and whether it was built now (False: reused from the cache).
    """
    if name not in BUILT_IN:
        raise UsageError(
            f"no built-in recipe for image {name!r} (known: {', '.join(BUILT_IN)})",
            fix="the Windows image is built with Packer: see docs/windows.md",
        )
    check_build_host()
    catalog.root.mkdir(parents=True, exist_ok=True)
    with _build_lock(catalog.root / f".{name}.lock"):
        try:
            existing = catalog.find(name)
        except UsageError as unreadable:
            # Another cu-run version wrote it (or it was damaged): building is the fix it names.
            progress(f"the cached {name} has a manifest this cu-run cannot read; rebuilding "
                     f"({unreadable.message.splitlines()[0]})")
            existing = None
        if existing and not force:
            if existing.manifest.builder.endswith(f"recipe {recipe_hash(recipe_dir(name))}"):
                return existing, False
            progress(f"the cached {name} was built from another recipe; rebuilding")
        return _build_linux(catalog, RECIPES[name], progress), True


def check_build_host() -> None:
    missing = [f"{tool} (apt install {pkg})" for tool, pkg in REQUIRED_TOOLS.items() if not shutil.which(tool)]
    if missing:
        raise UsageError(
            "the image build needs tools that are not installed: " + ", ".join(missing),
            fix="run scripts/setup-host.sh, or install the packages named",
        )
    if os.geteuid() != 0:
        raise UsageError(
            "building a Linux guest needs root (mmdebstrap --mode=root, chroot)",
            fix="run the build as root: sudo cu-run image build NAME",
        )


@contextmanager
def _build_lock(path: Path):
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                f"another build of this image is running (lock {path})",
                fix="wait for it to finish; its result is reused",
            ) from None
        yield


def recipe_hash(recipe: Path) -> str:
    """A hash of every file of the recipe and the boot command line: what built the image.

    A cached image whose hash differs was built from another recipe and is rebuilt.
    """
    spec = RECIPES.get(recipe.name)
    digest = hashlib.sha256(KERNEL_CMDLINE.encode() + repr(spec).encode() + GUEST_AGENT_COMMAND.encode()
                            + BUILD_LAYOUT.encode())
    for folder in (recipe, recipe.parent / "common"):
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(folder.parent)).encode() + b"\0" + path.read_bytes())
    # Of guest_agent/linux, only the program the build installs: the rest are guest programs the
    # runner sends with each call (runner/guest/programs.py), which no image holds.
    installed = GUEST_AGENT_DIR / GUEST_AGENT_PROGRAM
    digest.update(str(installed.relative_to(GUEST_AGENT_DIR.parent)).encode() + b"\0" + installed.read_bytes())
    return digest.hexdigest()[:16]


def build_variant(catalog: Catalog, spec: LinuxRecipe, recipe: Path, progress: Progress = print) -> Image:
    """Builds the recipe folder RECIPE (beside a copy of images/common/) as SPEC says, into CATALOG:
    how a bench compares a variant of a built-in guest (another desktop) with the guest itself."""
    check_build_host()
    catalog.root.mkdir(parents=True, exist_ok=True)
    return _build_linux(catalog, spec, progress, recipe)


def _build_linux(catalog: Catalog, spec: LinuxRecipe, progress: Progress, recipe: Path | None = None) -> Image:
    name = spec.name
    recipe = recipe or recipe_dir(name)
    started = time.monotonic()
    with scratch_then_rename(catalog.folder(name), catalog.root / f".build-{name}-{os.getpid()}") as work:
        keys = private_dir(work / "keys")
        _make_keys(keys)
        _run_recipe(recipe / "build.sh", work, keys, progress, spec.password)
        for leftover in ("client_key.pub", "admin_key.pub", "ssh_host_ed25519_key"):
            (keys / leftover).unlink()  # the guest's private host key stays only inside the guest
        disk = work / "disk.qcow2"
        progress("hashing the golden disk")
        packages = _packages(work / "packages.tsv")
        manifest = ImageManifest(
            name=name,
            profile=linux.PROFILE_NAME,
            disk=disk.name,
            disk_sha256=sha256_file(disk),
            disk_bytes=disk.stat().st_size,
            boot=DirectBoot(kernel="vmlinuz", initrd="initrd.img", cmdline=KERNEL_CMDLINE),
            screen=spec.screen,
            desktop_color=spec.desktop_color,
            pointer_offset=spec.pointer_offset,
            desktop_ready_check=spec.desktop_ready_check,
            guest_agent=GUEST_AGENT_COMMAND,
            memory_mib=spec.memory_mib,
            warm_apps=spec.warm_apps,
            credentials=Credentials(user=spec.user, password=spec.password),
            ssh=SshAccess(
                user=spec.user,
                private_key="keys/client_key",
                host_key=" ".join((keys / "ssh_host_ed25519_key.pub").read_text().split()[:2]),
                admin_user="root",
                admin_private_key="keys/admin_key",
            ),
            built_at=datetime.now(UTC),
            build_seconds=round(time.monotonic() - started, 1),
            builder=f"cu-run {__version__} recipe {recipe_hash(recipe)}",
            packages=packages,
            qemu_agent=any(p.startswith("qemu-guest-agent=") for p in packages),
        )
        (work / "packages.tsv").unlink()
        (work / MANIFEST).write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n")
        (work / MANIFEST).chmod(0o600)  # it names the keys and holds the desktop user's password
        disk.chmod(0o444)  # the golden disk is only ever a backing file
    return catalog.get(name)


def _make_keys(keys: Path) -> None:
    for key, comment in (("ssh_host_ed25519_key", "cu-run-guest-host"), ("client_key", "cu-run-runner"),
                         ("admin_key", "cu-run-runner-admin")):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(keys / key)],
            check=True,
        )


def run_logged(argv: list[str], log_path: Path, step: Callable[[str], str | None], progress: Progress, *,
               env: dict[str, str] | None = None, cwd: Path | None = None, header: str = "",
               keep: int = 20) -> tuple[int, list[str]]:
    """Runs a long build command with its output (stdout and stderr) going to LOG_PATH; the lines
    STEP picks a step name from go to PROGRESS. Returns the exit code and the last KEEP lines."""
    with log_path.open("w") as log:
        log.write(header)
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd)
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            log.write(line)
            tail = (tail + [line.rstrip()])[-keep:]
            if (name := step(line)) is not None:
                progress(name)
        return proc.wait(), tail


def _recipe_step(line: str) -> str | None:
    return line.strip().lstrip("= ").removeprefix("I: ") if line.startswith(("==", "I: ")) else None


def _run_recipe(script: Path, work: Path, keys: Path, progress: Progress, password: str) -> None:
    log_path = work / "build.log"
    code, tail = run_logged(["sh", str(script), str(work), str(keys)], log_path, _recipe_step, progress,
                            env=dict(os.environ, CU_GUEST_AGENT=str(GUEST_AGENT_DIR / GUEST_AGENT_PROGRAM),
                                     CU_USER_PASSWORD=password, CU_PYTHON=sys.executable))
    if code != 0:
        kept = work.parent / f"{work.name}.failed.log"
        shutil.copy(log_path, kept)
        raise InfraError(
            f"the image recipe {script} failed (exit {code}); last lines:\n  " + "\n  ".join(tail),
            fix=f"read the whole log at {kept}; a network error from the Debian mirror is worth a retry",
        )


def _packages(tsv: Path) -> list[str]:
    return [line.replace("\t", "=") for line in tsv.read_text().splitlines() if line.strip()]


def _builder(name: str) -> Builder:
    return Builder(name, lambda request: build_image(request.catalog, name, force=request.force,
                                                     progress=request.status),
                   f"a Debian recipe (images/{name}/), built with mmdebstrap")


LINUX_BUILDERS = [register_builder(_builder(name)) for name in RECIPES]
