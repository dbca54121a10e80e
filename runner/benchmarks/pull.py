"""Unpacking what a guest's collector gathered, which the agent may have shaped: names, links,
sizes and kinds of file are all the guest's to choose.

The collector packs its export folder as a tar (runner.benchmarks.linux_steps). Here only
regular files and folders come out, under names of plain parts (no absolute path, no `..`, no
NUL, bounded length), each written by a fresh exclusive create inside TARGET, with the count
and the total size bounded. Links, devices and FIFOs are skipped and listed. Whatever the tar
holds, nothing is written outside TARGET, and the unpacking ends in bounded time.
"""

from __future__ import annotations

import os
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

MAX_TOTAL = 256 * 2**20
MAX_MEMBERS = 2000
MAX_NAME = 255
MAX_DEPTH = 8


class CollectedRejected(Exception):
    """The collected output breaks a bound: it is not scored (the episode fails)."""


@dataclass
class Unpacked:
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # links, FIFOs, devices: name and why
    total: int = 0


def safe_name(name: str) -> tuple[str, ...] | None:
    """NAME's parts, or None when it is not a plain relative path of bounded depth."""
    if "\0" in name or "\\" in name or name.startswith("/"):
        return None
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if not parts or len(parts) > MAX_DEPTH or any(p == ".." or len(p.encode()) > MAX_NAME for p in parts):
        return None
    return parts


def unpack(archive: Path, target: Path, max_total: int = MAX_TOTAL, max_members: int = MAX_MEMBERS) -> Unpacked:
    """Unpacks ARCHIVE into TARGET (made, must not exist). Raises CollectedRejected past a bound
    or on a tar that cannot be read."""
    if archive.stat().st_size > max_total + 1024 * max_members + 10240:
        raise CollectedRejected(f"the collected archive is {archive.stat().st_size} bytes, over the bound")
    target.mkdir(parents=True)
    root_fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    found = Unpacked()
    try:
        with tarfile.open(archive, "r:") as tar:
            for count, member in enumerate(_members(tar), 1):
                if count > max_members:
                    raise CollectedRejected(f"the collected output has over {max_members} entries")
                parts = safe_name(member.name)
                if parts is None:
                    found.skipped.append(f"{member.name!r}: not a plain relative name")
                    continue
                if member.isdir():
                    _folder(root_fd, parts)
                    continue
                if not member.isreg():
                    found.skipped.append(f"{'/'.join(parts)}: {_kind(member)}, not a regular file")
                    continue
                found.total += member.size
                if found.total > max_total:
                    raise CollectedRejected(f"the collected output is over {max_total // 2**20} MiB")
                _write(root_fd, parts, tar, member)
                found.files.append("/".join(parts))
    except tarfile.TarError as exc:
        raise CollectedRejected(f"the collected archive cannot be read: {exc}") from None
    finally:
        os.close(root_fd)
    return found


def _members(tar: tarfile.TarFile):
    while True:
        member = tar.next()
        if member is None:
            return
        yield member


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym() or member.islnk():
        return "a link"
    if member.isfifo():
        return "a FIFO"
    if member.isdev():
        return "a device"
    return "not a file"


def _folder(root_fd: int, parts: tuple[str, ...]) -> int:
    """The folder PARTS under root_fd, made as needed, opened without following any link; the
    caller closes it. Only folders this unpacking made can be there: the target was new."""
    fd = os.dup(root_fd)
    for part in parts:
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _write(root_fd: int, parts: tuple[str, ...], tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    parent = _folder(root_fd, parts[:-1]) if len(parts) > 1 else os.dup(root_fd)
    try:
        try:
            fd = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
        except FileExistsError:
            raise CollectedRejected(f"{'/'.join(parts)} appears twice in the collected output") from None
        with os.fdopen(fd, "wb") as out:
            source = tar.extractfile(member)
            assert source is not None
            left = member.size
            while left > 0:
                chunk = source.read(min(left, 2**20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
    finally:
        os.close(parent)


def is_plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
