"""The files a host-side verifier reads, copied from the guest's disk as it was after the stop.

A task scored on the disk (`scoring: disk`) names what its verifier reads (`disk_files:`). After
the agent is stopped and the guest's filesystems are frozen, those paths are read from the
episode's overlay on the host (runner.scoring.ext4_reader) into a folder of the episode's, which
the verifier then reads in its sandbox (runner.scoring.disk_verifier). No program of the guest
reads or serves anything, so nothing the agent left can answer in a file's place.

Each named path is found as the guest's kernel would find it, links on the way followed, but a
link it names itself is not: the host reads every file of the disk, root's too, where a program of
the desktop user's could not, so a link the agent made must not lead the copy there. Files and
folders are copied; a link, a device or a socket is not, and MANIFEST lists each such entry with
its kind (and a link's target), so a verifier that cares can tell. Bounded: MAX_ENTRIES entries
and MAX_BYTES bytes in all; past either the copy stops and the manifest says so.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from runner.scoring.ext4_reader import DiskFormatError, Ext4, Inode

MAX_ENTRIES = 20_000
MAX_BYTES = 64 << 20  # a file-state task reads documents; an agent's sparse file cannot fill the host
MANIFEST = "manifest.json"


@dataclass
class _Copy:
    fs: Ext4
    into: Path
    entries: int = 0
    bytes: int = 0
    manifest: dict[str, dict] = field(default_factory=dict)
    over: str | None = None


def copy_disk_files(fs: Ext4, paths: tuple[str, ...], into: Path) -> dict:
    """PATHS (absolute guest paths) from FS into INTO, each at its guest path under INTO (INTO/home/cu/goal.txt);
    INTO/MANIFEST says what each named path was, what was not copied and why. Returns the manifest."""
    into.mkdir(mode=0o700, exist_ok=True)  # in the run's folder, which is the runner's alone
    copy = _Copy(fs, into)
    for path in paths:
        try:
            number = fs.lookup(path)
        except DiskFormatError as exc:
            copy.manifest[path] = {"kind": "unreadable", "why": str(exc)}
            continue
        if number is None:
            copy.manifest[path] = {"kind": "missing"}
            continue
        _copy_tree(copy, path, number)
    manifest = {"paths": copy.manifest, "entries": copy.entries, "bytes": copy.bytes, "stopped": copy.over}
    (into / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    (into / MANIFEST).chmod(0o600)
    return manifest


def _copy_tree(copy: _Copy, named: str, number: int) -> None:
    """The named path NAMED (inode NUMBER) and, for a folder, all under it, folder by folder: a
    loop, not a recursion, so a tree however deep is copied (or stopped at the bounds)."""
    stack = [(named, number)]
    while stack and copy.over is None:
        path, number = stack.pop()
        children = _copy_entry(copy, path, number, named=path == named)
        stack += reversed(children)


def _copy_entry(copy: _Copy, path: str, number: int, *, named: bool) -> list[tuple[str, int]]:
    """Copies the entry PATH (inode NUMBER); returns a folder's entries, to copy next."""
    copy.entries += 1
    if copy.entries > MAX_ENTRIES:
        copy.over = f"more than {MAX_ENTRIES} entries"
        return []
    children: list[tuple[str, int]] = []
    try:
        inode = copy.fs.inode(number)
        if inode.kind == "f":
            _copy_file(copy, path, inode)
        elif inode.kind == "d":
            _host_folder(copy.into, path)
            for name, child in sorted(copy.fs.entries(inode)):
                if _plain_name(name):
                    children.append((posixpath.join(path, name.decode("utf-8", "surrogateescape")), child))
                else:
                    copy.manifest[posixpath.join(path, repr(name))] = {
                        "kind": "unreadable", "why": "a name no filesystem of the guest's kernel makes"}
        elif inode.kind == "l":
            # Not followed, named or not: the host reads any file of the disk, where a program of
            # the user's could not, and a link could lead the copy to one.
            copy.manifest[path] = {"kind": "link", "target": copy.fs.link_target(inode).decode("utf-8", "replace")}
            return []
        else:
            copy.manifest[path] = {"kind": "other"}
            return []
    except DiskFormatError as exc:
        copy.manifest[path] = {"kind": "unreadable", "why": str(exc)}
        return []
    except FileExistsError:
        return []  # copied already, under another of the named paths
    except OSError as exc:  # a named path under another that is a file on the disk; a path too long
        copy.manifest[path] = {"kind": "unreadable", "why": f"could not be copied: {exc.strerror}"}
        return []
    if named:
        copy.manifest[path] = {"kind": "folder"} if inode.kind == "d" else {"kind": "file", "size": inode.size}
    return children


def _copy_file(copy: _Copy, path: str, inode: Inode) -> None:
    if copy.bytes + inode.size > MAX_BYTES:
        copy.over = f"more than {MAX_BYTES} bytes"
        copy.manifest[path] = {"kind": "file", "size": inode.size, "why": "not copied: over the bytes a copy holds"}
        return
    target = _host_folder(copy.into, posixpath.dirname(path)) / posixpath.basename(path)
    # A new file in a folder the copy made itself: nothing there was made by anyone else.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        for chunk in copy.fs.chunks(inode):
            out.write(chunk)
    copy.bytes += inode.size


def _host_folder(into: Path, path: str) -> Path:
    """INTO's folder for the guest's PATH, each folder on the way made the runner's alone (0700),
    as every folder of a run is."""
    folder = into
    for part in (p for p in path.split("/") if p):
        folder = folder / part
        folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _plain_name(name: bytes) -> bool:
    return bool(name) and name not in (b".", b"..") and b"/" not in name and b"\0" not in name
