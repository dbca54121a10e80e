"""The windows guest's write-set lister: guest_agent/windows/list-tree.ps1, and what it prints parsed strictly."""

from __future__ import annotations

from runner.errors import InfraError
from runner.guest.programs import ps_program
from runner.profiles.listing import (HASH_BUDGET_S, HASH_MAX_BYTES, MAX_ENTRIES, Entry, Listing, Manifest, Watch,
                                     WriteSetLister, pruned_folders, shown)
from typing_extensions import override


class WindowsLister(WriteSetLister):
    default_watch = (r"C:\evals", "~")
    default_ignore = (r"~\AppData\**", r"~\NTUSER.DAT*", r"~\ntuser.*", r"~\*.log*")

    @override
    def list_script(self, watch: Watch) -> str:
        """guest_agent/windows/list-tree.ps1: one line per item under the roots: kind, size, mtime
        ticks, sha256, path, tab-separated. It enters no folder whose items the ignore patterns
        all cover (runner.profiles.listing.pruned_folders); the host applies the patterns as
        ever. NTFS's change time is not reachable from PowerShell without P/Invoke, so on Windows
        an unhashed file is compared by size and mtime (docs/threat-model.md)."""
        return ps_program("windows/list-tree.ps1", Roots=tuple(watch.roots),
                          Pruned=pruned_folders(watch.ignore, windows=True), MaxEntries=MAX_ENTRIES,
                          HashMaxBytes=HASH_MAX_BYTES, HashBudgetSeconds=HASH_BUDGET_S)

    @override
    def parse_listing(self, output: str) -> Listing:
        """Lines split on \\n only: a name may hold U+2028 or U+0085, where str.splitlines would
        cut its path and the cut one could stand for another item's. The lister prints each path
        once, so a path printed twice is refused."""
        entries: Manifest = {}
        unhashed = []
        truncated = False
        for line in output.split("\n"):
            line = line.removesuffix("\r")
            if line == "truncated":
                truncated = True
                continue
            parts = line.split("\t", 4)
            if len(parts) != 5:
                continue
            kind, size, ticks, digest, path = parts
            if kind not in ("d", "f") or not (size or "0").isdigit() or not (ticks or "0").isdigit() \
                    or path in entries:
                raise InfraError("the write-set listing from the guest has a line the lister does not print: "
                                 f"{shown(line)[:200]!r}")
            entries[path] = Entry(kind, int(size or 0), digest.lower(), int(ticks or 0) / 1e7)
            if kind == "f" and not digest:
                unhashed.append(path)
        return Listing(entries, tuple(unhashed), truncated)
