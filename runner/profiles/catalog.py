"""The image catalog: built golden images and their manifests.

Layout under the catalog folder (``<cache>/images`` by default):

    <name>/manifest.json   what the image is and how to reach it
    <name>/disk.qcow2      the golden disk, read-only, never written
    <name>/vmlinuz, initrd.img   for direct kernel boot (linux profile)
    <name>/keys/           the runner's SSH key for this image and the pinned host key
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.errors import UsageError
from runner.profiles import PROFILES, DesktopUser, GuestProfile, get_profile

MANIFEST = "manifest.json"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ScreenSize(Frozen):
    width: int = Field(gt=0)
    height: int = Field(gt=0)


class SshAccess(Frozen):
    """How the runner logs in to a linux guest: as the desktop user, for what the agent may do
    (the oracle, the file and accessibility tools), and as the admin account, for what decides
    the score (setup, listings, verifiers, checks), by another key the desktop user never sees."""

    user: str
    private_key: str = Field(description="path of the runner's private key, relative to the image folder")
    host_key: str = Field(description="the guest's host public key, 'ssh-ed25519 AAAA...' (pinned)")
    port: int = 22
    admin_user: str = Field(default="root", description="the privileged account the verifiers run as")
    admin_private_key: str | None = Field(
        default=None, description="the runner's key for admin_user, relative to the image folder; "
                                  "None: the image predates the privileged channel and must be rebuilt")


class WinRmAccess(Frozen):
    """How the runner reaches a windows guest: WinRM over HTTP through the host's loopback forward,
    as the desktop user (a standard user) for what the agent may do, and as a separate
    administrator for what decides the score."""

    user: str
    password: str
    port: int = 5985
    transport: Literal["ntlm", "basic"] = "ntlm"
    admin_user: str | None = Field(default=None, description="the administrator the verifiers run as; "
                                   "None: the image predates it and must be rebuilt")
    admin_password: str | None = None


class UefiFirmware(Frozen):
    """OVMF: the read-only code on the host, and the image's variable store (each episode
    boots from its own copy, so nothing one episode writes to NVRAM reaches another)."""

    code: str = Field(description="absolute path of OVMF_CODE on the host")
    vars: str = Field(description="the image's variable store, relative to the image folder")


class Credentials(Frozen):
    """The desktop user's account (for a screen locker or a GUI password prompt)."""

    user: str
    password: str


class DirectBoot(Frozen):
    """Kernel, initrd and command line booted by QEMU without a bootloader."""

    kernel: str
    initrd: str
    cmdline: str


class ImageManifest(Frozen):
    name: str
    profile: str = Field(description="the guest profile (runner.profiles): linux, windows")
    disk: str = Field(description="golden disk file name, relative to the image folder")
    disk_sha256: str
    disk_bytes: int
    boot: DirectBoot | None = Field(default=None, description="None: the disk's own firmware boot")
    firmware: UefiFirmware | None = Field(default=None, description="UEFI (windows); None: SeaBIOS")
    screen: ScreenSize
    desktop_color: str | None = Field(
        default=None, description="solid desktop background, '#rrggbb': the desktop is up when it shows"
    )
    desktop_ready_check: str | None = Field(
        default=None,
        description="a guest shell script that exits 0 once the desktop's own windows are up "
        "(the screenshot test alone cannot see that a window is still starting)",
    )
    guest_agent: str | None = Field(
        default=None,
        description="the guest shell command that runs the guest agent (guest_agent/): window list "
        "and accessibility tree; None: the image has none",
    )
    qemu_agent: bool = Field(
        default=False,
        description="the guest runs the QEMU guest agent on a virtio-serial port: the runner's admin "
        "channel where the profile can use it (no login to wait for after a restore)",
    )
    warm_apps: str | None = Field(
        default=None,
        description="a command the desktop user runs before a warm state is saved: each big app started once "
        "and closed, so its files are in the guest's page cache after every restore (linux-desktop)",
    )
    pointer_offset: int = Field(
        default=0,
        description="pixels the guest's pointer lands short of where VNC aimed: QEMU and the guest each "
        "truncate when scaling absolute coordinates; the display adds this back (measured per image)",
    )
    memory_mib: int = 1024
    vcpus: int = Field(default=1, ge=1, le=64, description="the episode VM's CPUs, as the image was built for: "
                       "Windows 11 on one core pushes setup, listings and verifiers toward their time limits")
    credentials: Credentials
    ssh: SshAccess | None = None
    winrm: WinRmAccess | None = None
    licence_expires: date | None = Field(default=None, description="an evaluation licence's last day")
    built_at: datetime
    build_seconds: float
    builder: str = Field(description="cu-run version and recipe hash that built the image")
    packages: list[str] = Field(default_factory=list, description="'name=version' of every package")

    @model_validator(mode="after")
    def _access_fits_profile(self) -> ImageManifest:
        if self.profile not in PROFILES:
            raise ValueError(f"profile {self.profile!r} is not one of {', '.join(PROFILES)}")
        problem = self.guest.access_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def guest(self) -> GuestProfile:
        return get_profile(self.profile)

    @property
    def desktop_user(self) -> DesktopUser:
        return DesktopUser(self.credentials.user, self.guest.home(self.credentials.user))

    def admin_access_missing(self) -> str | None:
        """Why the runner cannot reach the image's admin account, or None: images built before
        the privileged channel have none, and verifying through the desktop user is not sound."""
        return self.guest.admin_access_missing(self)

    @property
    def shell_port(self) -> int:
        """The guest port of the runner's shells."""
        return self.guest.shell_port(self)


class Image:
    """A catalog entry: its manifest and the folder its files live in."""

    def __init__(self, folder: Path, manifest: ImageManifest) -> None:
        self.folder = folder
        self.manifest = manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def disk(self) -> Path:
        return self.folder / self.manifest.disk

    def path(self, relative: str) -> Path:
        return self.folder / relative

    def verify_disk(self) -> None:
        """Raises UsageError when the golden disk is missing or not what was built."""
        if not self.disk.is_file():
            raise UsageError(
                f"image {self.name}: golden disk {self.disk} is missing",
                fix=f"rebuild it: cu-run image build {self.name} --force",
            )
        actual = sha256_file(self.disk)
        if actual != self.manifest.disk_sha256:
            raise UsageError(
                f"image {self.name}: golden disk {self.disk} has sha256 {actual[:16]}..., "
                f"the manifest says {self.manifest.disk_sha256[:16]}...; it was changed after the build",
                fix=f"rebuild it: cu-run image build {self.name} --force",
            )


class ImageNotBuilt(UsageError):
    """The catalog has no image of that name (runner.images.builders.image_named adds the fix
    that builds it)."""


class Catalog:
    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, name: str) -> Path:
        return self.root / name

    def images(self) -> list[Image]:
        """The images whose manifests this cu-run can read; unreadable() names the others."""
        found = []
        for manifest in self._manifests():
            try:
                found.append(self._load(manifest))
            except UsageError:
                continue
        return found

    def unreadable(self) -> list[UsageError]:
        """Each image folder whose manifest this cu-run cannot read (another version wrote it, or
        it was damaged): the error that reading it gives, with its fix."""
        problems = []
        for manifest in self._manifests():
            try:
                self._load(manifest)
            except UsageError as exc:
                problems.append(exc)
        return problems

    def _manifests(self) -> list[Path]:
        return sorted(self.root.glob(f"*/{MANIFEST}")) if self.root.is_dir() else []

    def find(self, name: str) -> Image | None:
        manifest = self.folder(name) / MANIFEST
        return self._load(manifest) if manifest.is_file() else None

    def get(self, name: str) -> Image:
        image = self.find(name)
        if image is None:
            known = ", ".join(i.name for i in self.images()) or "none"
            raise ImageNotBuilt(f"no image named {name!r} in the catalog at {self.root} (built: {known})",
                                fix="build it with cu-run image build, or use a built image")
        return image

    def _load(self, manifest: Path) -> Image:
        try:
            data = json.loads(manifest.read_text())
            return Image(manifest.parent, ImageManifest.model_validate(data))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise UsageError(
                f"image manifest {manifest} is not valid: {exc}",
                fix=f"rebuild the image: cu-run image build {manifest.parent.name} --force",
            ) from exc


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()
