"""The write-set listing read from the guest's disk on the host, with no guest code running:
the same Listing the guest's lister prints (guest_agent/linux/lister.py), field for
field, so that a listing taken in the guest before the agent compares with this one after it.

What differs from the lister, and why:
- no mount points: the disk holds one filesystem, so a watched root must lie on the guest's
  root filesystem (a folder mounted over inside a root is seen as the disk has it);
- a path the disk's structures do not hold together for is listed as unreadable ("?"), with the
  reason, so it counts as changed, as the lister lists what it cannot read;
- the hashing budget is spent at the host's speed, not the guest's.
"""

from __future__ import annotations

import hashlib
import posixpath
import stat
import time

from runner.scoring.ext4_reader import DiskFormatError, Ext4, Inode
from runner.profiles.listing import HASH_BUDGET_S, HASH_MAX_BYTES, MAX_ENTRIES, Entry, Listing, Watch, matches


def list_disk(fs: Ext4, watch: Watch, *, hash_max: int = HASH_MAX_BYTES, budget_s: float = HASH_BUDGET_S,
              max_entries: int = MAX_ENTRIES) -> Listing:
    """WATCH's roots on FS, as the guest's lister would list them from inside."""
    walk = _Walk(fs, watch, hash_max, budget_s, max_entries)
    for root in watch.roots:
        walk.root(root)
    return Listing(walk.entries, tuple(walk.unhashed), walk.truncated, read_from="disk")


class _Walk:
    def __init__(self, fs: Ext4, watch: Watch, hash_max: int, budget_s: float, max_entries: int) -> None:
        self.fs, self.watch = fs, watch
        self.hash_max, self.max_entries = hash_max, max_entries
        self.deadline = time.monotonic() + budget_s
        self.entries: dict[str, Entry] = {}
        self.unhashed: list[str] = []
        self.truncated = False
        self.folders_entered: set[int] = set()  # a folder met again is a loop no kernel makes

    def root(self, path: str) -> None:
        try:
            number = self.resolve(path)
        except DiskFormatError as exc:
            self.unreadable(path, str(exc))
            return
        if number is None:
            return  # not there: the lister skips a missing root too
        stack = [(path, number)]
        while stack and not self.truncated:
            folder, number = stack.pop()
            inode = self.add(folder, number)
            if inode is None or inode.kind != "d":
                continue
            if number in self.folders_entered:
                self.unreadable(folder, f"folder inode {number} is met twice: the folders loop")
                continue
            self.folders_entered.add(number)
            try:
                children = sorted((name.decode("utf-8", "surrogateescape"), child)
                                  for name, child in self.fs.entries(inode))
            except DiskFormatError as exc:
                self.entries[folder] = Entry("?", 0, "", error=str(exc))
                continue
            # Folders walked in name order, each once its files are listed: stack them reversed.
            for name, child in children:
                path = posixpath.join(folder, name)
                if self.is_folder(child):
                    continue
                self.add(path, child)
            stack += reversed([(posixpath.join(folder, name), child) for name, child in children
                               if self.is_folder(child)])

    def is_folder(self, number: int) -> bool:
        try:
            return self.fs.inode(number).kind == "d"
        except DiskFormatError:
            return False

    def resolve(self, path: str) -> int | None:
        """The inode PATH names, its last name not followed (lstat); None where it is not there."""
        return self.fs.lookup(path)

    def add(self, path: str, number: int) -> Inode | None:
        if path in self.entries:  # roots that overlap
            return None
        if len(self.entries) >= self.max_entries:
            self.truncated = True
            return None
        try:
            inode = self.fs.inode(number)
            xattrs = tuple((name, hashlib.sha256(value).hexdigest())
                           for name, value in sorted(self.fs.xattrs(inode).items()))
            target = self.fs.link_target(inode).decode("utf-8", "surrogateescape") if inode.kind == "l" else None
            sha = self.digest(path, inode) if inode.kind == "f" else ""
        except DiskFormatError as exc:
            self.unreadable(path, str(exc))
            return None
        self.entries[path] = Entry(inode.kind, inode.size, sha, inode.mtime_ns / 1e9, mode=stat.S_IMODE(inode.mode),
                                   owner=(inode.uid, inode.gid), ctime_ns=inode.ctime_ns, inode=inode.number,
                                   target=target, xattrs=xattrs)
        return inode

    def digest(self, path: str, inode: Inode) -> str:
        if inode.size > self.hash_max or inode.ctime_ns < self.watch.since_ns or time.monotonic() > self.deadline \
                or any(matches(path, p) for p in self.watch.ignore):
            self.unhashed.append(path)
            return ""
        h = hashlib.sha256()
        for chunk in self.fs.chunks(inode):
            h.update(chunk)
        return h.hexdigest()

    def unreadable(self, path: str, why: str) -> None:
        self.entries[path] = Entry("?", 0, "", error=f"the disk does not hold together here: {why}")
