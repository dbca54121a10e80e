"""What a guest profile reads of an image: the manifest's fields, and the image's files.

The profiles' contract (runner.profiles.base) names these, and the catalog
(runner.images.catalog) builds its `ImageManifest` on `ManifestFields`, adding what needs the
profiles themselves: the check that an image's access fits its profile, and the profile. So this
module imports nothing of runner.profiles, and the contract imports no catalog.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field


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


class ManifestFields(Frozen):
    """An image manifest's fields (the catalog's ImageManifest checks them against the profile)."""

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


class ImageFiles(Protocol):
    """A built image as a profile reads it (the catalog's Image)."""

    @property
    def name(self) -> str: ...

    @property
    def manifest(self) -> ManifestFields: ...

    def path(self, relative: str) -> Path:
        """RELATIVE, a path the manifest names, in the image's folder."""
        ...
