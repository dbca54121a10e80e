"""What pruning ignored folders saves the Windows write-set listing and hand-home walks, on a
synthetic tree shaped like a Windows profile after its first logon (AppX packages, Edge's
caches, the shell's caches under AppData; a few hundred items elsewhere; the legacy junctions),
side by side in one run:

    python bench/windows_walks.py [--appdata 50000] [--n 3] [--dir /tmp]

PowerShell is not run: this is a model of guest_agent/windows/list-tree.ps1's walk in Python
(os.scandir, links listed but never entered, each file hashed within the size and time limits),
once entering everything (the listing before pruning) and once with the same prune rule
(runner.profiles.listing.pruned_folders: the items of such a folder listed unhashed, not
entered), each followed by the host's ignore matcher over what it listed. It also checks that
both leave the host the same entries once the ignore patterns are applied. hand-home's walk is
modelled as one lstat an item (it reads each item's owner). Prints one JSON object: items
listed, files hashed and the time of each way, and their ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.profiles import get_profile
from runner.profiles.listing import HASH_BUDGET_S, HASH_MAX_BYTES, MAX_ENTRIES, expand, matches, pruned_folders
from runner.profiles.listing import WriteSetLister

HOME = "C:\\Users\\cu"
EVALS = "C:\\evals"
_LEGACY_JUNCTIONS = ("Application Data", "Cookies", "Local Settings", "My Documents", "NetHood", "PrintHood",
                     "Recent", "SendTo", "Start Menu", "Templates")


def build_profile(top: Path, appdata_items: int, seed: int = 7) -> dict[str, Path]:
    """A profile at TOP/Users/cu with about APPDATA_ITEMS items under AppData, and TOP/evals.
    Returns the guest paths (HOME, EVALS) and the host folders they stand for."""
    rng = random.Random(seed)
    home, evals = top / "Users" / "cu", top / "evals"
    made = 0

    def put(folder: Path, count: int, stem: str, size: tuple[int, int] = (64, 4096)) -> None:
        nonlocal made
        folder.mkdir(parents=True, exist_ok=True)
        made += 1
        for i in range(count):
            (folder / f"{stem}{i:05d}").write_bytes(rng.randbytes(rng.randint(*size)))
        made += count

    local = home / "AppData" / "Local"
    share = appdata_items  # AppX packages 40 %, Edge 35 %, the shell's caches and the rest 25 %
    packages = max(1, share * 40 // 100 // 60)
    for p in range(packages):
        base = local / "Packages" / f"Microsoft.App{p:03d}_8wekyb3d8bbwe"
        for sub, n in (("AC/INetCache", 12), ("AC/Temp", 4), ("LocalCache/Local", 10), ("LocalState", 14),
                       ("Settings", 3), ("SystemAppData/Helium", 4), ("TempState", 2), ("RoamingState", 1)):
            put(base / sub, n, "s")
    edge = local / "Microsoft" / "Edge" / "User Data" / "Default"
    edge_items = share * 35 // 100
    put(edge / "Cache" / "Cache_Data", edge_items * 6 // 10, "f_")
    put(edge / "Code Cache" / "js", edge_items * 2 // 10, "c")
    for depth in range(edge_items * 2 // 10 // 40):
        put(edge / "Service Worker" / "CacheStorage" / f"{depth:04x}" / "index", 38, "w")
    rest = share * 25 // 100
    for sub, part in (("Microsoft/Windows/INetCache/IE", 30), ("Microsoft/Windows/Explorer", 5),
                      ("Microsoft/Windows/WebCache", 5), ("Temp", 30), ("Microsoft/OneDrive/logs/Common", 10)):
        put(local / sub, rest * part // 100, "t")
    put(home / "AppData" / "LocalLow" / "Microsoft" / "CryptnetUrlCache" / "Content", rest * 5 // 100, "u")
    roaming = home / "AppData" / "Roaming" / "Microsoft" / "Windows"
    put(roaming / "Start Menu" / "Programs" / "Accessories", rest * 5 // 100, "lnk")
    put(roaming / "Recent" / "AutomaticDestinations", rest * 10 // 100, "r")
    # The rest of the profile: a few hundred items.
    for known in ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Videos", "Favorites", "Links",
                  "Contacts", "Saved Games", "Searches", "3D Objects", "OneDrive"):
        put(home / known, rng.randint(2, 25), "doc", (100, 64_000))
    for name in ("NTUSER.DAT", "ntuser.dat.LOG1", "ntuser.dat.LOG2", "ntuser.ini",
                 "NTUSER.DAT{53b39e88-18c4-11ea-a811-000d3aa4692b}.TM.blf"):
        (home / name).write_bytes(rng.randbytes(4096))
    for name in _LEGACY_JUNCTIONS:  # junctions on Windows: listed, never entered
        (home / name).symlink_to(home / "AppData")
    put(evals, 40, "seed", (100, 20_000))
    return {HOME: home, EVALS: evals}


@dataclass
class Walk:
    entries: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # path -> kind, size, sha256
    hashed: int = 0
    truncated: bool = False


def list_tree(roots: dict[str, Path], pruned: tuple[str, ...]) -> Walk:
    """list-tree.ps1's walk: each root's items, depth first; a folder whose guest path is in
    PRUNED (exactly) has its items listed unhashed and none entered; links never entered."""
    prune, walk = set(pruned), Walk()
    started = time.monotonic()
    for guest_root, host_root in roots.items():
        pending = [(guest_root, host_root)]
        while pending:
            folder, local = pending.pop()
            ignored = folder in prune
            try:
                items = list(os.scandir(local))
            except OSError:
                continue
            for item in items:
                path = folder + "\\" + item.name
                if path in walk.entries:
                    continue
                if len(walk.entries) >= MAX_ENTRIES:
                    walk.truncated = True
                    return walk
                link = item.is_symlink()  # a junction or a link: a folder if it leads to one, as .NET says
                enter = not ignored and not link
                if item.is_dir(follow_symlinks=link):
                    walk.entries[path] = ("d", 0, "")
                    if enter:
                        pending.append((path, Path(item.path)))
                    continue
                size, digest = item.stat(follow_symlinks=False).st_size, ""
                if enter and size <= HASH_MAX_BYTES and time.monotonic() - started < HASH_BUDGET_S:
                    digest = hashlib.sha256(Path(item.path).read_bytes()).hexdigest()
                    walk.hashed += 1
                walk.entries[path] = ("f", size, digest)
    return walk


def hand_home(home: Path, pruned: tuple[str, ...]) -> int:
    """hand-home.ps1's walk: each item's owner read (an lstat here), folders in PRUNED not entered."""
    prune, seen = set(pruned), 0
    pending = [(HOME, home)]
    while pending:
        folder, local = pending.pop()
        for item in os.scandir(local):
            if item.is_symlink():
                continue
            item.stat(follow_symlinks=False)
            seen += 1
            if item.is_dir(follow_symlinks=False) and folder not in prune:
                pending.append((folder + "\\" + item.name, Path(item.path)))
    return seen


def kept(walk: Walk, ignore: tuple[str, ...]) -> dict[str, tuple[str, int, str]]:
    """What the host compares: the entries no ignore pattern matches (runner.scoring.writeset)."""
    return {p: e for p, e in walk.entries.items() if not any(matches(p, i, windows=True) for i in ignore)}


def one_run(roots: dict[str, Path], ignore: tuple[str, ...], pruned: tuple[str, ...]) -> dict:
    t = time.perf_counter()
    walk = list_tree(roots, pruned)
    walked = time.perf_counter() - t
    left = kept(walk, ignore)
    return {"walk": walk, "kept": left, "guest_s": walked, "total_s": time.perf_counter() - t}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--appdata", type=int, default=50_000, help="items under AppData (about)")
    parser.add_argument("--n", type=int, default=3, help="runs of each way, alternated")
    parser.add_argument("--dir", default=None, help="where to build the tree (a temporary folder)")
    args = parser.parse_args()

    windows = get_profile("windows")
    ignore = tuple(expand(p, HOME) for p in windows.part(WriteSetLister).default_ignore)
    pruned = pruned_folders(ignore, windows=True)
    top = Path(tempfile.mkdtemp(prefix="cu-run-walks-", dir=args.dir))
    try:
        t = time.perf_counter()
        roots = build_profile(top, args.appdata)
        built = time.perf_counter() - t
        runs: dict[str, list[dict]] = {"everything_then_filter": [], "pruned_during_walk": []}
        homes: dict[str, list[float]] = {"everything": [], "pruned": []}
        counts: dict[str, int] = {}
        for _ in range(args.n):  # alternated, so the page cache and the host's load treat both alike
            runs["everything_then_filter"].append(one_run(roots, ignore, ()))
            runs["pruned_during_walk"].append(one_run(roots, ignore, pruned))
            for name, prune in (("everything", ()), ("pruned", pruned)):
                t = time.perf_counter()
                counts[name] = hand_home(roots[HOME], prune)
                homes[name].append(time.perf_counter() - t)
        before, after = runs["everything_then_filter"][-1], runs["pruned_during_walk"][-1]
        if before["kept"] != after["kept"]:
            sys.exit("pruning changed what the host compares: the prune rule is wrong")
        figures = {}
        for name, samples in runs.items():
            walk = samples[-1]["walk"]
            figures[name] = {"items_listed": len(walk.entries), "files_hashed": walk.hashed,
                             "entries_left_after_filter": len(samples[-1]["kept"]), "truncated": walk.truncated,
                             "guest_walk": summarize([s["guest_s"] for s in samples]),
                             "walk_and_filter": summarize([s["total_s"] for s in samples])}
        a, b = figures["everything_then_filter"], figures["pruned_during_walk"]
        emit("windows_walks", {
            "method": "a Python model of list-tree.ps1 and hand-home.ps1 (os.scandir) on a synthetic profile; "
                      "PowerShell itself was not run",
            "tree": {"appdata_items_asked": args.appdata, "build_s": round(built, 1), "ignore": list(ignore),
                     "pruned_folders": list(pruned)},
            "listing": figures,
            "listing_ratio": {"items_listed": round(a["items_listed"] / b["items_listed"], 1),
                              "files_hashed": round(a["files_hashed"] / max(1, b["files_hashed"]), 1),
                              "walk_and_filter_median": round(a["walk_and_filter"]["median_s"]
                                                              / b["walk_and_filter"]["median_s"], 1)},
            "same_entries_after_filter": True,
            "hand_home": {"items_everything": counts["everything"], "items_pruned": counts["pruned"],
                          "everything": summarize(homes["everything"]), "pruned": summarize(homes["pruned"]),
                          "items_ratio": round(counts["everything"] / counts["pruned"], 1)},
        })
    finally:
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
