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


@dataclass(frozen=True)
class Entry:
    kind: str  # f file, d folder, l symlink, o other
    size: int
    sha256: str  # files only; "" otherwise


Manifest = dict[str, Entry]


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
        elif old.kind != new.kind or (old.kind == "f" and (old.size, old.sha256) != (new.size, new.sha256)):
            changes.append(Change(path, "modified"))
        # a folder whose contents changed shows up through its contents, not itself
    return changes


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

def linux_list_script(roots: tuple[str, ...]) -> str:
    """Prints, NUL-separated, 'kind size path' for everything under ROOTS, then '--hashes--'
    and sha256sum -z's output for every regular file. -xdev: never wander into /proc."""
    quoted = " ".join(shlex.quote(r) for r in roots)
    return (f"for r in {quoted}; do [ -e \"$r\" ] && find \"$r\" -xdev -printf '%y %s %p\\0'; done\n"
            "printf -- '--hashes--\\0'\n"
            f"for r in {quoted}; do [ -e \"$r\" ] && find \"$r\" -xdev -type f -exec sha256sum -z -- {{}} +; done\n"
            "exit 0\n")


def parse_linux_listing(output: str) -> Manifest:
    listing, sep, hashes = output.partition("--hashes--\0")
    if not sep:
        raise InfraError("the write-set listing from the guest is truncated (no hash section)")
    manifest: Manifest = {}
    for record in filter(None, listing.split("\0")):
        kind, size, path = record.split(" ", 2)
        manifest[path] = Entry(kind if kind in "fdl" else "o", int(size), "")
    for record in filter(None, hashes.split("\0")):
        digest, path = record.split("  ", 1)
        path = path.lstrip("\n")
        if path in manifest:
            manifest[path] = Entry("f", manifest[path].size, digest)
    return manifest


def windows_list_script(roots: tuple[str, ...]) -> str:
    """PowerShell printing one line per item under ROOTS: kind, size, sha256, path, tab-separated.
    Windows paths hold no tabs or newlines, so lines are enough."""
    quoted = ", ".join("'" + r.replace("'", "''") + "'" for r in roots)
    return (
        "$ErrorActionPreference = 'SilentlyContinue'\n"
        f"foreach ($root in @({quoted})) {{\n"
        "    if (-not (Test-Path -LiteralPath $root)) { continue }\n"
        "    Get-ChildItem -LiteralPath $root -Recurse -Force | ForEach-Object {\n"
        "        if ($_.PSIsContainer) { \"d`t0`t`t$($_.FullName)\" }\n"
        "        else {\n"
        "            $hash = (Get-FileHash -LiteralPath $_.FullName -Algorithm SHA256).Hash\n"
        "            \"f`t$($_.Length)`t$hash`t$($_.FullName)\"\n"
        "        }\n"
        "    }\n"
        "}\n"
    )


def parse_windows_listing(output: str) -> Manifest:
    manifest: Manifest = {}
    for line in output.splitlines():
        parts = line.rstrip("\r").split("\t", 3)
        if len(parts) != 4:
            continue
        kind, size, digest, path = parts
        manifest[path] = Entry(kind, int(size or 0), digest.lower())
    return manifest


def take_manifest(shell: GuestShell, profile: str, roots: tuple[str, ...]) -> Manifest:
    script, parse = ((linux_list_script, parse_linux_listing) if profile == "linux"
                     else (windows_list_script, parse_windows_listing))
    result = shell.run(script(roots), timeout=LIST_TIMEOUT)
    if result.exit_code != 0:
        raise InfraError(f"listing the watched folders failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
    return parse(result.stdout)
