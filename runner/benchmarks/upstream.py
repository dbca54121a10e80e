"""A benchmark's tree as it is on disk: where its task files are, which domain each belongs to,
and which version of the benchmark it is.

OSWorld keeps `evaluation_examples/examples/<domain>/<id>.json` and a `test_all.json` listing
the ids per domain; WindowsAgentArena keeps the same layout under
`src/win-arena-container/client/evaluation_examples_windows/`. A lab passes its own checkout
(or an unpacked snapshot) of either.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from runner.benchmarks import registry
from runner.benchmarks.registry import UpstreamTask
from runner.errors import UsageError



@dataclass(frozen=True)
class UpstreamTree:
    bench: str
    root: Path
    version: str  # a git commit, or what the folder's name says (osworld-f6cee71), or "unknown"
    tasks: tuple[UpstreamTask, ...]


def read_tree(bench: str, src: Path, version: str | None = None) -> UpstreamTree:
    """Every task file of BENCH under SRC, in a stable order (domain, then id)."""
    examples_root = _find_examples_root(bench, src)
    examples = examples_root / "examples"
    test_all = _id_sets(examples_root / "test_all.json")
    test_small = _id_sets(examples_root / "test_small.json")
    tasks = []
    for path in sorted(examples.glob("*/*.json")):
        raw = path.read_bytes()
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{path}: not valid JSON ({exc})", fix="restore the file from the benchmark's checkout") from None
        if not isinstance(data, dict) or "id" not in data or "instruction" not in data or "evaluator" not in data:
            raise UsageError(f"{path}: not a task file of {bench} (no id, instruction or evaluator)")
        domain = path.parent.name
        tasks.append(UpstreamTask(
            bench=bench, upstream_id=str(data["id"]), domain=domain,
            path=str(path.relative_to(src)), raw=raw, data=data,
            in_test_all=str(data["id"]) in test_all.get(domain, set()),
            in_test_small=str(data["id"]) in test_small.get(domain, set())))
    if not tasks:
        raise UsageError(f"{examples} holds no task files (<domain>/<id>.json)")
    return UpstreamTree(bench, src, version or _version(src), tuple(tasks))


def _find_examples_root(bench: str, src: Path) -> Path:
    examples_root = registry.get(bench).examples_root
    if not src.is_dir():
        raise UsageError(f"{src}: no such folder", fix=f"pass the root of a checkout of {bench}")
    for candidate in (src / examples_root, src):
        if (candidate / "examples").is_dir():
            return candidate
    raise UsageError(f"{src} is not a {bench} tree: it has no {examples_root}/examples/",
                     fix=f"pass the root of a checkout of {bench}, or the folder that holds examples/")


def _id_sets(path: Path) -> dict[str, set[str]]:
    """test_all.json / test_small.json: {domain: [ids]}; empty when the tree has none."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {domain: set(map(str, ids)) for domain, ids in data.items()}


def _version(src: Path) -> str:
    """The commit of a git checkout; else a short hash in the folder's name (osworld-f6cee71)."""
    try:
        out = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", out.stdout.strip()):
            # A snapshot inside some other repository would give that repository's commit.
            top = subprocess.run(["git", "-C", str(src), "rev-parse", "--show-toplevel"], capture_output=True,
                                 text=True, timeout=10).stdout.strip()
            if top and Path(top).resolve() == src.resolve():
                return out.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    found = re.search(r"-([0-9a-f]{7,40})$", src.resolve().name)
    return found.group(1) if found else "unknown"
