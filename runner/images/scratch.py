"""Build in a scratch folder, then rename it into place: nothing half-made is ever in place.

Images, Windows images and warm slots are all made this way, so a build that fails or is
interrupted leaves the old complete thing (or nothing) where a reader looks, never a part.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from runner.errors import InfraError


def remove_tree(path: Path) -> None:
    """Removes PATH whatever it holds; read-only disks (golden, frozen) are made writable first.

    A build interrupted while mmdebstrap had the host's /proc, /sys, /dev/pts and /dev/shm
    mounted in its chroot leaves them mounted under PATH, and a removal that went down through
    them would delete the host's own files (/dev/shm's, found so). So whatever is mounted
    under PATH is unmounted first, deepest first, and a mount that stays stops the removal."""
    if not path.exists():
        return
    for mount in sorted(mounts_under(path), key=len, reverse=True):
        subprocess.run(["umount", "--lazy", mount], capture_output=True)
    left = mounts_under(path)
    if left:
        raise InfraError(f"{path} still has filesystems mounted under it ({', '.join(sorted(left))}): "
                         "not removed, so nothing of the host's is deleted through them",
                         fix=f"unmount them (umount --lazy as root), then remove {path}")
    for disk in path.rglob("*.qcow2"):
        disk.chmod(0o644)
    shutil.rmtree(path, ignore_errors=True)


def mounts_under(path: Path) -> list[str]:
    """The mount points at or under PATH, from /proc/self/mounts (octal escapes decoded)."""
    root = os.path.realpath(path)
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [_OCTAL.sub(lambda m: chr(int(m.group(1), 8)), line.split(" ")[1]) for line in lines if " " in line]
    return [p for p in points if p == root or p.startswith(root + "/")]


_OCTAL = re.compile(r"\\([0-7]{3})")


@contextmanager
def scratch_then_rename(final: Path, scratch: Path,
                        remove: Callable[[Path], None] = remove_tree) -> Iterator[Path]:
    """Yields SCRATCH, made afresh. When the body returns, SCRATCH replaces FINAL; when it
    raises (or is interrupted), SCRATCH is removed and the error goes on."""
    remove(scratch)
    scratch.mkdir(parents=True)
    try:
        yield scratch
    except BaseException:
        remove(scratch)
        raise
    if final.exists():
        remove(final)
    scratch.rename(final)
