"""The write set: what the agent changed in the watched folders, and whether it was allowed.

The runner lists the watched roots (path, type, size, mtime, sha256) through the admin
channel, with the guest profile's lister, after setup and again after the agent. Anything created, removed or changed outside the
task's allowed paths fails the episode, the paths named: an agent that did the job and
broke something else did not do the job.

Paths are matched with glob patterns where ``**`` crosses folders and ``*`` does not;
``~`` is the desktop user's home. Each profile ignores the churn any desktop session
makes by itself (caches, shell history, application settings).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
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
    kind: str  # f file, d folder, l symlink, o other
    size: int
    sha256: str  # files only; "" for folders and for files left unhashed (see HASH_MAX_BYTES)
    mtime: float = 0.0  # seconds since the epoch: what tells an unhashed file changed


Manifest = dict[str, Entry]


@dataclass(frozen=True)
class Listing:
    entries: Manifest
    unhashed: tuple[str, ...] = ()  # files compared by size and mtime, not content
    truncated: bool = False  # more entries than MAX_ENTRIES: the rest is not listed


@dataclass(frozen=True)
class Change:
    path: str
    what: str  # created, removed, modified

    def __str__(self) -> str:
        return f"{self.path} ({self.what})"


def expand(pattern: str, home: str) -> str:
    if pattern == "~":
        return home
    if pattern.startswith(("~/", "~\\")):
        return home + pattern[1:]
    return pattern


@lru_cache(maxsize=512)
def _compile(pattern: str, case_insensitive: bool) -> re.Pattern:
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
    return re.compile("".join(out) + r"\Z", re.IGNORECASE if case_insensitive else 0)


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
        elif old.kind != new.kind or (old.kind == "f" and _file_changed(old, new)):
            changes.append(Change(path, "modified"))
        # a folder whose contents changed shows up through its contents, not itself
    return changes


def _file_changed(old: Entry, new: Entry) -> bool:
    if old.sha256 and new.sha256:
        return (old.size, old.sha256) != (new.size, new.sha256)
    return (old.size, old.mtime) != (new.size, new.mtime)


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

def take_listing(shell: GuestShell, guest: GuestProfile, roots: tuple[str, ...]) -> Listing:
    """Lists ROOTS through SHELL (the admin channel) with the profile's lister. Raises InfraError
    when the listing fails, CommandTimeout past LIST_TIMEOUT: the caller decides whose fault that is."""
    result = shell.run(guest.list_script(roots), timeout=LIST_TIMEOUT)
    return listing_of(guest, result.exit_code, result.stdout, result.stderr)


def step_then_list(shell: GuestShell, guest: GuestProfile, step: str, what: str, step_timeout: float,
                   roots: tuple[str, ...]) -> tuple[ExecResult, Listing | None] | None:
    """STEP (an admin script), then the listing of ROOTS, in one guest command: a command costs
    a channel and processes under TCG. The listing starts only once STEP succeeded; a random
    boundary no process of the agent's can know parts their output.

    Returns STEP's result (its own stdout) and the listing, or the whole command's result and
    None when STEP failed; None when the profile cannot chain them (run them apart then).
    A timeout says which part ran past it: WHAT, or the listing."""
    boundary = f"cu-run-listing-{secrets.token_hex(16)}"
    script = guest.chained_script(step, boundary, guest.list_script(roots))
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
