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

Paths are matched with glob patterns where ``**`` crosses folders and ``*`` does not;
``~`` is the desktop user's home. Each profile ignores the churn any desktop session
makes by itself (caches, shell history, application settings).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING

from runner.errors import CommandTimeout, InfraError
from runner.guest.base import ExecResult, GuestShell

if TYPE_CHECKING:
    from runner.profiles import GuestProfile

LIST_TIMEOUT = 120.0
# A listing must end in bounded time whatever the agent left: a 50 GB sparse file, or a
# million small ones. Files over HASH_MAX_BYTES, and any once HASH_BUDGET_S is spent, are
# compared by size and mtime instead of content; past MAX_ENTRIES the listing stops.
HASH_MAX_BYTES = 64 * 2**20
HASH_BUDGET_S = 30.0
MAX_ENTRIES = 200_000


@dataclass(frozen=True)
class Entry:
    kind: str  # f file, d folder, l symlink, o other (FIFO, socket, device), ? could not be listed
    size: int
    sha256: str  # files only; "" for folders and for files left unhashed (see HASH_MAX_BYTES)
    mtime: float = 0.0  # seconds since the epoch
    # What the kernel keeps and the lister reports where the guest has it (None: not reported):
    mode: int | None = None  # permission bits, setuid and sticky included
    owner: tuple[int, int] | None = None  # uid, gid
    ctime_ns: int | None = None  # set by the kernel on every change; no user can set it back
    inode: int | None = None
    target: str | None = None  # a link's target
    # Extended attributes, POSIX ACLs (system.posix_acl_*) included: (name, SHA-256 of the value)
    # in name order; ("", "!why") when they could not be read.
    xattrs: tuple[tuple[str, str], ...] | None = None
    error: str = ""  # why the lister could not read it (a file's content, a folder's entries, itself)


Manifest = dict[str, Entry]


@dataclass(frozen=True)
class Listing:
    entries: Manifest
    unhashed: tuple[str, ...] = ()  # files compared by metadata (size, mtime, ctime, inode), not content
    truncated: bool = False  # more entries than MAX_ENTRIES: the rest is not listed
    started_ns: int | None = None  # the guest's clock when the listing began (a later one hashes what changed since)
    read_from: str = "guest"  # "guest": the profile's lister in the guest; "disk": its disk, on the host


@dataclass(frozen=True)
class Change:
    path: str
    what: str  # created, removed, modified
    detail: str = ""  # for a modification: what tells it changed, where it is not the content

    def __str__(self) -> str:
        return f"{shown(self.path)} ({self.what}{': ' + shown(self.detail) if self.detail else ''})"


def shown(text: str) -> str:
    """TEXT (a path from the guest: any bytes) with what is not printable escaped, so that a
    name holding a newline or a line separator stays on its line in a reason or a report."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def expand(pattern: str, home: str) -> str:
    if pattern == "~":
        return home
    if pattern.startswith(("~/", "~\\")):
        return home + pattern[1:]
    return pattern


@lru_cache(maxsize=512)
def _compile(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append(r"[^/\\]*")
            i += 1
        elif pattern[i] == "?":
            out.append(r"[^/\\]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # DOTALL: a name may hold a newline, and an allowed folder allows it too.
    return re.compile("".join(out) + r"\Z", re.DOTALL | (re.IGNORECASE if case_insensitive else 0))


def matches(path: str, pattern: str, *, windows: bool = False) -> bool:
    """PATH matches PATTERN, or lies under it (an allowed folder allows what is inside)."""
    rx = _compile(pattern.rstrip("/\\"), windows)
    if rx.match(path):
        return True
    sep = "\\" if windows else "/"
    parent = path
    while sep in parent:
        parent = parent.rsplit(sep, 1)[0]
        if parent and rx.match(parent):
            return True
    return False


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


# -- listing the guest

@dataclass(frozen=True)
class Watch:
    """What a listing covers: the watched ROOTS; IGNORE, patterns it lists but never hashes
    (their changes do not count); SINCE_NS, a guest time: files whose ctime is older were not
    changed since, so they need no hashing (the listing before the agent passes 0)."""

    roots: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    since_ns: int = 0

    def after(self, before: Listing | None) -> Watch:
        """The watch for the listing after BEFORE: files unchanged since it began go unhashed.
        Two seconds of margin for the guest clock's granularity."""
        if before is None or before.started_ns is None:
            return self
        return replace(self, since_ns=max(0, before.started_ns - 2_000_000_000))


def take_listing(shell: GuestShell, guest: GuestProfile, watch: Watch) -> Listing:
    """Lists WATCH through SHELL (the admin channel) with the profile's lister. Raises InfraError
    when the listing fails, CommandTimeout past LIST_TIMEOUT: the caller decides whose fault that is."""
    result = shell.run(guest.list_script(watch), timeout=LIST_TIMEOUT)
    return listing_of(guest, result.exit_code, result.stdout, result.stderr)


def step_then_list(shell: GuestShell, guest: GuestProfile, step: str, what: str, step_timeout: float,
                   watch: Watch) -> tuple[ExecResult, Listing | None] | None:
    """STEP (an admin script), then the listing of ROOTS, in one guest command: a command costs
    a channel and processes under TCG. The listing starts only once STEP succeeded; a random
    boundary no process of the agent's can know parts their output.

    Returns STEP's result (its own stdout) and the listing, or the whole command's result and
    None when STEP failed; None when the profile cannot chain them (run them apart then).
    A timeout says which part ran past it: WHAT, or the listing."""
    boundary = f"cu-run-listing-{secrets.token_hex(16)}"
    script = guest.chained_script(step, boundary, guest.list_script(watch))
    if script is None:
        return None
    try:
        result = shell.run(script, timeout=step_timeout + LIST_TIMEOUT)
    except CommandTimeout as exc:
        part = what if boundary not in exc.stdout else "listing the watched folders"
        raise CommandTimeout(f"{part}: {exc.message}", stdout=exc.stdout, stderr=exc.stderr) from exc
    before, found, listing = result.stdout.partition(boundary + "\n")
    if not found:
        return result, None
    return (ExecResult(result.exit_code, before, result.stderr),
            listing_of(guest, result.exit_code, listing, result.stderr))


def listing_of(guest: GuestProfile, exit_code: int, stdout: str, stderr: str) -> Listing:
    """What the lister printed, parsed; InfraError when it failed."""
    if exit_code != 0:
        raise InfraError(f"listing the watched folders failed (exit {exit_code}): {stderr.strip()[-300:]}")
    return guest.parse_listing(stdout)
