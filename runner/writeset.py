"""The write set: what the agent changed in the watched folders, and whether it was allowed.

The runner lists the watched roots (path, type, size, sha256) through the guest shell
after setup and again after the agent. Anything created, removed or changed outside the
task's allowed paths fails the episode, the paths named: an agent that did the job and
broke something else did not do the job.

Paths are matched with glob patterns where ``**`` crosses folders and ``*`` does not;
``~`` is the desktop user's home. Each profile ignores the churn any desktop session
makes by itself (caches, shell history, application settings).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache

from runner.errors import InfraError
from runner.guest.base import GuestShell

DEFAULT_WATCH = {"linux": ("~",), "windows": (r"C:\evals", "~")}
# What a desktop session writes whoever drives it; never the agent's doing.
DEFAULT_IGNORE = {
    "linux": ("~/.cache/**", "~/.local/**", "~/.config/**", "~/.bash_history", "~/.lesshst", "~/.python_history",
              "~/.xsession-errors*", "~/.Xauthority", "~/.viminfo", "~/.dbus/**", "~/.ssh/**"),
    "windows": (r"~\AppData\**", r"~\NTUSER.DAT*", r"~\ntuser.*", r"~\*.log*"),
}
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

# Run as root with python3 -I (no user site, no PYTHON* variables): a JSON document of
# {path: [kind, size, mtime, sha256]} for everything under the roots, never leaving their
# filesystems nor following links, with the limits above.
_LINUX_LISTER = """
import hashlib, json, os, stat, sys, time
roots, hash_max, budget, max_entries = json.loads(sys.argv[1])
started = time.monotonic()
entries, unhashed, truncated = {}, [], False

def kind_of(mode):
    return "f" if stat.S_ISREG(mode) else "d" if stat.S_ISDIR(mode) else "l" if stat.S_ISLNK(mode) else "o"

def digest(path, size):
    if size > hash_max or time.monotonic() - started > budget:
        return ""
    h = hashlib.sha256()
    try:
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK)) as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return ""
    return h.hexdigest()

def add(path):
    global truncated
    if len(entries) >= max_entries:
        truncated = True
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return True  # gone while listing
    kind = kind_of(st.st_mode)
    sha = digest(path, st.st_size) if kind == "f" else ""
    if kind == "f" and not sha:
        unhashed.append(path)
    entries[path] = [kind, st.st_size, st.st_mtime, sha]
    return True

for root in roots:
    if not os.path.lexists(root):
        continue
    device = os.lstat(root).st_dev
    add(root)
    for folder, dirs, files in os.walk(root):
        kept = []
        for name in sorted(dirs):
            path = os.path.join(folder, name)
            if not add(path):
                break
            if path in entries and entries[path][0] == "d" and os.lstat(path).st_dev == device:
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            if not add(os.path.join(folder, name)):
                break
        if truncated:
            break
json.dump({"entries": entries, "unhashed": unhashed, "truncated": truncated}, sys.stdout)
"""


def linux_list_script(roots: tuple[str, ...]) -> str:
    args = json.dumps([list(roots), HASH_MAX_BYTES, HASH_BUDGET_S, MAX_ENTRIES])
    return f"exec python3 -I -c {shlex.quote(_LINUX_LISTER)} {shlex.quote(args)}\n"


def parse_linux_listing(output: str) -> Listing:
    try:
        data = json.loads(output)
        entries = {path: Entry(kind, int(size), sha, float(mtime))
                   for path, (kind, size, mtime, sha) in data["entries"].items()}
        return Listing(entries, tuple(data["unhashed"]), bool(data["truncated"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise InfraError(f"the write-set listing from the guest is not what the lister prints: {exc}; "
                         f"it begins {output[:200]!r}") from None


def windows_list_script(roots: tuple[str, ...]) -> str:
    """PowerShell printing one line per item under ROOTS: kind, size, mtime ticks, sha256, path,
    tab-separated. Windows paths hold no tabs or newlines, so lines are enough."""
    quoted = ", ".join("'" + r.replace("'", "''") + "'" for r in roots)
    return (
        "$ErrorActionPreference = 'SilentlyContinue'\n"
        f"$started = Get-Date\n$count = 0\n"
        f"foreach ($root in @({quoted})) {{\n"
        "    if (-not (Test-Path -LiteralPath $root)) { continue }\n"
        "    Get-ChildItem -LiteralPath $root -Recurse -Force | ForEach-Object {\n"
        f"        $count++; if ($count -gt {MAX_ENTRIES}) {{ 'truncated'; break }}\n"
        "        $ticks = $_.LastWriteTimeUtc.Ticks\n"
        "        if ($_.PSIsContainer) { \"d`t0`t$ticks`t`t$($_.FullName)\" }\n"
        "        else {\n"
        "            $hash = ''\n"
        f"            if ($_.Length -le {HASH_MAX_BYTES} -and ((Get-Date) - $started).TotalSeconds -lt {HASH_BUDGET_S:g}) {{\n"
        "                $hash = (Get-FileHash -LiteralPath $_.FullName -Algorithm SHA256).Hash\n"
        "            }\n"
        "            \"f`t$($_.Length)`t$ticks`t$hash`t$($_.FullName)\"\n"
        "        }\n"
        "    }\n"
        "}\n"
    )


def parse_windows_listing(output: str) -> Listing:
    entries: Manifest = {}
    unhashed = []
    truncated = False
    for line in output.splitlines():
        line = line.rstrip("\r")
        if line == "truncated":
            truncated = True
            continue
        parts = line.split("\t", 4)
        if len(parts) != 5:
            continue
        kind, size, ticks, digest, path = parts
        entries[path] = Entry(kind, int(size or 0), digest.lower(), int(ticks or 0) / 1e7)
        if kind == "f" and not digest:
            unhashed.append(path)
    return Listing(entries, tuple(unhashed), truncated)


def take_listing(shell: GuestShell, profile: str, roots: tuple[str, ...]) -> Listing:
    """Lists ROOTS through SHELL (the admin channel). Raises InfraError when the listing fails,
    CommandTimeout past LIST_TIMEOUT: the caller decides whose fault that is."""
    script, parse = ((linux_list_script, parse_linux_listing) if profile == "linux"
                     else (windows_list_script, parse_windows_listing))
    result = shell.run(script(roots), timeout=LIST_TIMEOUT)
    if result.exit_code != 0:
        raise InfraError(f"listing the watched folders failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
    return parse(result.stdout)


def take_manifest(shell: GuestShell, profile: str, roots: tuple[str, ...]) -> Manifest:
    return take_listing(shell, profile, roots).entries
