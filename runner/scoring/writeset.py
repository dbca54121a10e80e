"""The write set: what the agent changed in the watched folders, and whether it was allowed.

The runner lists the watched roots through the admin channel, with the guest profile's
lister, after setup and again after the agent. Anything created, removed or changed outside
the task's allowed paths fails the episode, the paths named: an agent that did the job and
broke something else did not do the job.

What counts as a change of a path that was there before:
- its kind, permission bits or owner; a link's target;
- a file's content, by SHA-256, where both listings hashed it;
- its extended attributes, POSIX ACLs among them (they leave the permission bits alone);
- otherwise (over the hash limit, the time budget spent, its ctime older than the first
  listing) its size, mtime, ctime and inode. mtime is set by the user and proves nothing, but
  the kernel sets ctime on every write and every mtime change (touch -r included), and no
  unprivileged user can set it back; a file replaced by another has another inode. So a file
  the agent changed cannot look unchanged, whether or not it was hashed;
- for anything but a folder, its ctime and inode even when all else is the same: a file
  written and put back, or given another hard link, was changed. (A folder's ctime moves with
  every entry made in it, caches included; its changes show through its entries.)
- a file the lister could not read, with the reason.

The limits (time, entries) stay: a listing past its entries fails the write set, and every
file compared without its content is named in write-set.json. The budget is not spent on
ignored paths, which are listed but never hashed.

The listings themselves, and the path patterns, are runner.profiles.listing's.
"""

from __future__ import annotations

from dataclasses import dataclass

from typing_extensions import override

from runner.profiles.listing import Entry, Manifest, matches, shown


@dataclass(frozen=True)
class Change:
    path: str
    what: str  # created, removed, modified
    detail: str = ""  # for a modification: what tells it changed, where it is not the content

    @override
    def __str__(self) -> str:
        return f"{shown(self.path)} ({self.what}{': ' + shown(self.detail) if self.detail else ''})"


def diff(before: Manifest, after: Manifest) -> list[Change]:
    changes = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old is None:
            changes.append(Change(path, "created"))
        elif new is None:
            changes.append(Change(path, "removed"))
        else:
            changed = what_changed(old, new)
            if changed is not None:
                changes.append(Change(path, "modified", changed))
    return changes


_KINDS = {"f": "a file", "d": "a folder", "l": "a link", "o": "a FIFO, socket or device", "?": "unlistable"}


def what_changed(old: Entry, new: Entry) -> str | None:
    """How NEW differs from OLD (the same path): "" for a change of content, else what tells it;
    None when nothing does. A folder whose contents changed shows through its contents."""
    if new.error:
        return f"could not be read: {new.error}"
    if old.kind != new.kind:
        return f"was {_KINDS.get(old.kind, old.kind)}, now {_KINDS.get(new.kind, new.kind)}"
    told = []
    if _differ(old.mode, new.mode):
        told.append(f"mode {old.mode:o} -> {new.mode:o}")
    if old.owner is not None and new.owner is not None and old.owner != new.owner:
        told.append(f"owner {old.owner[0]}:{old.owner[1]} -> {new.owner[0]}:{new.owner[1]}")
    if old.kind == "l" and _differ(old.target, new.target):
        told.append(f"link target {old.target} -> {new.target}")
    if _differ(old.xattrs, new.xattrs):
        told.append(_attributes_changed(old.xattrs or (), new.xattrs or ()))
    if old.kind == "f":
        if old.sha256 and new.sha256:
            if (old.size, old.sha256) != (new.size, new.sha256):
                told.insert(0, "")
        elif (old.size, old.mtime) != (new.size, new.mtime) or _differ(old.ctime_ns, new.ctime_ns) \
                or _differ(old.inode, new.inode):
            told.append("contents not hashed; size, mtime, ctime or inode changed")
    if not told and old.kind != "d" and (_differ(old.ctime_ns, new.ctime_ns) or _differ(old.inode, new.inode)):
        # The same content, mode, owner and attributes, but the kernel saw a change: something
        # was written and put back, or a hard link made. A folder's ctime moves with every entry
        # made in it (caches included), so a folder's changes show through its entries instead.
        told.append("ctime or inode changed")
    if not told:
        return None
    return "; ".join(t for t in told if t)


def _attributes_changed(old: tuple[tuple[str, str], ...], new: tuple[tuple[str, str], ...]) -> str:
    """Which extended attributes differ, by name; an ACL is called one."""
    before, after = dict(old), dict(new)
    names = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    acl = {"system.posix_acl_access": "ACL", "system.posix_acl_default": "default ACL"}
    return "extended attributes changed: " + ", ".join(acl.get(n, n) or "unreadable" for n in names)


def _differ(a: object, b: object) -> bool:
    """Whether A and B differ, where both listings report the value (None: not reported)."""
    return a is not None and b is not None and a != b


def unexpected(changes: list[Change], allow: tuple[str, ...], ignore: tuple[str, ...], *,
               windows: bool = False) -> list[Change]:
    """The changes no allow or ignore pattern covers. A folder created only to hold allowed
    files is covered too (saving ~/Documents/new/a.txt needs ~/Documents/new)."""
    def covered(path: str) -> bool:
        return any(matches(path, p, windows=windows) for p in allow + ignore)

    left = [c for c in changes if not covered(c.path)]
    sep = "\\" if windows else "/"
    allowed_paths = [c.path for c in changes if covered(c.path)]
    return [c for c in left if not (c.what == "created" and any(p.startswith(c.path + sep) for p in allowed_paths))]
