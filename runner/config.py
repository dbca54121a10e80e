"""Where things live and which hypervisor to talk to, resolved in one place.

Flags win over environment variables, which win over defaults.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from runner.errors import UsageError

DEFAULT_LIBVIRT_URI = "qemu:///system"
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_root() -> Path:
    """Where the built-in suites, image recipes, guest agent and Packer template are: the source
    tree (a checkout, an editable install), or the copy a wheel installs as runner/_data."""
    installed = Path(__file__).resolve().parent / "_data"
    return installed if installed.is_dir() else PROJECT_ROOT


DATA_ROOT = data_root()


def default_cache_dir() -> Path:
    env = os.environ.get("CU_RUN_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "cu-run"


def default_libvirt_uri() -> str:
    return os.environ.get("CU_RUN_LIBVIRT_URI") or DEFAULT_LIBVIRT_URI


ADMIN_CHANNELS = ("agent", "ssh")


def admin_channel() -> str:
    """CU_RUN_ADMIN_CHANNEL: "agent" (default) lets a profile run the admin's commands through the
    QEMU guest agent when the image has one; "ssh" keeps them on the admin's SSH login (for
    comparing the two, or if an agent misbehaves)."""
    value = os.environ.get("CU_RUN_ADMIN_CHANNEL") or "agent"
    if value not in ADMIN_CHANNELS:
        raise UsageError(f"CU_RUN_ADMIN_CHANNEL={value!r} is not one of {', '.join(ADMIN_CHANNELS)}",
                         fix="unset it, or set it to agent or ssh")
    return value


@dataclass(frozen=True)
class Settings:
    """Resolved locations and connection for one invocation."""

    cache_dir: Path
    libvirt_uri: str
    admin_channel: str = "agent"  # one of ADMIN_CHANNELS

    @classmethod
    def resolve(cls, cache_dir: Path | None = None, libvirt_uri: str | None = None) -> Settings:
        """From the arguments and the environment; a bad CU_RUN_ADMIN_CHANNEL is refused here,
        once, before anything starts."""
        return cls(
            cache_dir=(cache_dir or default_cache_dir()).expanduser().resolve(),
            libvirt_uri=libvirt_uri or default_libvirt_uri(),
            admin_channel=admin_channel(),
        )

    @property
    def images_dir(self) -> Path:
        return self.cache_dir / "images"

    @property
    def episodes_dir(self) -> Path:
        """Per-episode working folders (overlay, serial log); removed at teardown."""
        return self.cache_dir / "episodes"


def free_bytes(path: Path) -> int:
    """Free bytes on the filesystem that holds PATH (or, while PATH does not exist yet, its
    nearest existing parent)."""
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def private_dir(path: Path) -> Path:
    """PATH as a folder only its owner may enter (made if missing): run folders, episode
    folders and keys hold screenshots, logs and credentials of the runner's user alone."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def recipe_dir(name: str) -> Path:
    """The build recipe of a built-in image (images/<name>/ in the source tree)."""
    return DATA_ROOT / "images" / name
