"""A guest's listing of the watched folders: what the write set (runner.scoring.writeset) compares.

The runner lists the watched roots through the admin channel with the guest profile's lister
(a WriteSetLister, the profile part defined here), or reads them from the disk on the host
(runner.scoring.disk_listing). Either way the result is a Listing of Entries, bounded by the
limits below whatever the agent left in the folders.

Paths are matched with glob patterns where ``**`` crosses folders and ``*`` does not;
``~`` is the desktop user's home. Each profile ignores the churn any desktop session
makes by itself (caches, shell history, application settings).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, replace
from abc import abstractmethod
from functools import lru_cache
from typing import Protocol

from runner.errors import CommandTimeout, InfraError
from runner.guest.base import ExecResult, GuestShell
from runner.profiles.parts import Part

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


def pruned_folders(patterns: tuple[str, ...], *, windows: bool = False) -> tuple[str, ...]:
    """Folders whose every item, at any depth, PATTERNS match (see matches()): a lister lists
    such a folder's own entries unhashed but enters none, since the host ignores all it would
    find there. (Its entries are still listed: writeset.unexpected excuses a folder the agent
    made to hold ignored items, and knows them by those.) Only from the patterns FOLDER and FOLDER/**
    (FOLDER\\** on Windows) whose FOLDER has no wildcard; any other pattern gives none, as a
    lister that prunes less is still right. A lister compares a folder's path with these
    exactly, case included: what differs only in case is entered, so no matcher of the guest's
    need agree with matches() on case."""
    tail = ("\\" if windows else "/") + "**"
    found: list[str] = []
    for pattern in patterns:
        folder = pattern.rstrip("/\\")
        if folder.endswith(tail):
            folder = folder[:-len(tail)]
        # None that ends in a separator: from C:\\** (a doubled separator) would come C:\, whose
        # items (C:\x) that pattern does not match.
        if folder and not folder.endswith(("/", "\\")) and not {"*", "?"} & set(folder) and folder not in found:
            found.append(folder)
    return tuple(found)


@dataclass(frozen=True)
class Watch:
    """What a listing covers: the watched ROOTS; IGNORE, patterns it lists but never hashes
    (their changes do not count), nor need it enter their pruned_folders(); SINCE_NS, a guest
    time: files whose ctime is older were not changed since, so they need no hashing (the
    listing before the agent passes 0)."""

    roots: tuple[str, ...]
    ignore: tuple[str, ...] = ()
    since_ns: int = 0

    def after(self, before: Listing | None) -> Watch:
        """The watch for the listing after BEFORE: files unchanged since it began go unhashed.
        Two seconds of margin for the guest clock's granularity."""
        if before is None or before.started_ns is None:
            return self
        return replace(self, since_ns=max(0, before.started_ns - 2_000_000_000))


class WriteSetLister(Part):
    """The profile part that lists the watched folders in the guest, through the admin channel."""

    label = "write-set lister"
    default_watch: tuple[str, ...]  # write-set roots; "~" is the desktop user's home
    default_ignore: tuple[str, ...]  # what any desktop session writes by itself
    # The filesystem of the guest's disk that the host can read for the write set after the agent
    # (runner/scoring/disk_listing.py), its watched roots all on it; None: the lister in the guest.
    disk_filesystem: str | None = None

    @abstractmethod
    def list_script(self, watch: Watch) -> str:
        """Lists everything under WATCH's roots, bounded (the limits above), for parse_listing:
        what the guest can tell of each entry, and files hashed unless ignored, over the limits,
        or unchanged since WATCH.since_ns."""

    @abstractmethod
    def parse_listing(self, output: str) -> Listing:
        """list_script's output as a Listing; raises InfraError when it is not that."""


class Chains(Protocol):
    """What step_then_list needs of the guest's scripts (runner.profiles.parts.TaskScripts)."""

    def chained_script(self, first: str, boundary: str, second: str) -> str | None: ...


def take_listing(shell: GuestShell, lister: WriteSetLister, watch: Watch) -> Listing:
    """Lists WATCH through SHELL (the admin channel) with LISTER. Raises InfraError when the listing
    fails, CommandTimeout past LIST_TIMEOUT: the caller decides whose fault that is."""
    result = shell.run(lister.list_script(watch), timeout=LIST_TIMEOUT)
    return listing_of(lister, result.exit_code, result.stdout, result.stderr)


def step_then_list(shell: GuestShell, scripts: Chains, lister: WriteSetLister, step: str, what: str,
                   step_timeout: float, watch: Watch) -> tuple[ExecResult, Listing | None] | None:
    """STEP (an admin script), then the listing of ROOTS, in one guest command: a command costs
    a channel and processes under TCG. The listing starts only once STEP succeeded; a random
    boundary no process of the agent's can know parts their output.

    Returns STEP's result (its own stdout) and the listing, or the whole command's result and
    None when STEP failed; None when the profile cannot chain them (run them apart then).
    A timeout says which part ran past it: WHAT, or the listing."""
    boundary = f"cu-run-listing-{secrets.token_hex(16)}"
    script = scripts.chained_script(step, boundary, lister.list_script(watch))
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
            listing_of(lister, result.exit_code, listing, result.stderr))


def listing_of(lister: WriteSetLister, exit_code: int, stdout: str, stderr: str) -> Listing:
    """What the lister printed, parsed; InfraError when it failed."""
    if exit_code != 0:
        raise InfraError(f"listing the watched folders failed (exit {exit_code}): {stderr.strip()[-300:]}")
    return lister.parse_listing(stdout)
