"""`cu-run tasks import osworld|waa SRC --out SUITE`: one cu-run task folder per upstream task.

    <suite>/import.json            what was imported: the benchmark, its version, counts by
                                   category and tag, the tasks left out and why
    <suite>/LICENSE                the benchmark's licence, as its tasks are redistributed
    <suite>/<id>/task.yaml         instruction, tags, source, exclusions, fidelity notes
    <suite>/<id>/upstream.json     the task file, byte for byte (source.sha256 is its hash)
    <suite>/<id>/setup.sh          the config steps, translated (runner.benchmarks.linux_steps)
    <suite>/<id>/collect.sh        postconfig, then each getter's gathering
    <suite>/<id>/steps.sh          the helpers both call
    <suite>/<id>/oracle.sh         cu-run's own solution, where the overlay has one
                                   (runner/benchmarks/oracles/<bench>/<id>.sh, with _lib.sh
                                   beside it as oracle_lib.sh); <id>.excluded there is a reason
                                   the task cannot run here that only running it showed

A task that cannot run here is written all the same, with its reasons in `excluded`: runs
leave it out, `tasks list` shows why. Importing again into the same folder replaces the
tasks it wrote and nothing else.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.benchmarks import registry
from runner.benchmarks.registry import Profile, UpstreamTask
from runner.benchmarks.classify import CATEGORIES, Classification, classify
from runner.benchmarks.upstream import UpstreamTree, read_tree
from runner.errors import UsageError
from runner.tasks.model import UPSTREAM_FILE

OVERLAYS = Path(__file__).with_name("oracles")
IMPORT_RECORD = "import.json"
TIMEOUT_S = 1200  # upstream bounds an episode by steps (15 to 100), not time; TCG is slow
COLLECT_TIMEOUT_S = 300  # postconfig sleeps, an app saving, each getter


@dataclass
class ImportReport:
    bench: str
    version: str
    out: Path
    written: int = 0
    categories: Counter = field(default_factory=Counter)
    tags: Counter = field(default_factory=Counter)
    excluded: dict[str, list[str]] = field(default_factory=dict)
    oracles: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"bench": self.bench, "version": self.version, "tasks": self.written,
                "runnable": self.written - len(self.excluded), "oracles": self.oracles,
                "by_category": {c: self.categories[c] for c in CATEGORIES},
                "by_tag": dict(sorted(self.tags.items())), "excluded": self.excluded}


def task_id(task: UpstreamTask) -> str:
    """The cu-run id: the task file's name, lower-case (ids are; WAA's have capitals)."""
    stem = Path(task.path).stem.lower()
    return re.sub(r"[^a-z0-9-]+", "-", stem).strip("-")


def import_tree(bench: str, src: Path, out: Path, version: str | None = None,
                say: Callable[[str], None] = lambda _m: None) -> ImportReport:
    tree = read_tree(bench, src, version)
    _check_out(out, bench)
    out.mkdir(parents=True, exist_ok=True)
    report = ImportReport(bench, tree.version, out)
    profile = registry.get(bench).profile
    seen: dict[str, str] = {}
    for number, task in enumerate(tree.tasks, 1):
        ident = task_id(task)
        if ident in seen:
            raise UsageError(f"{task.path} and {seen[ident]} would both be task {ident}")
        seen[ident] = task.path
        classification = classify(task, profile.collectable)
        _write_task(out / ident, ident, task, tree, classification, profile, report)
        if number % 50 == 0:
            say(f"  {number}/{len(tree.tasks)} tasks written")
    _copy_licence(tree, out)
    (out / IMPORT_RECORD).write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    return report


def _check_out(out: Path, bench: str) -> None:
    """OUT is new, empty, or an earlier import of BENCH: never a folder of other tasks."""
    if not out.exists() or not any(out.iterdir()):
        return
    record = out / IMPORT_RECORD
    if not record.is_file():
        raise UsageError(f"{out} is not empty and holds no earlier import ({IMPORT_RECORD})",
                         fix="choose a new --out folder")
    previous = json.loads(record.read_text()).get("bench")
    if previous != bench:
        raise UsageError(f"{out} holds an import of {previous}, not {bench}", fix="choose another --out folder")


def _write_task(folder: Path, ident: str, task: UpstreamTask, tree: UpstreamTree,
                classification: Classification, profile: Profile, report: ImportReport) -> None:
    setup, collect = profile.setup(task.data), profile.collect(task.data)
    excluded = list(classification.excluded)
    for problem in setup.problems + collect.problems:
        if "gdrive" in classification.tags and problem.startswith(("step googledrive", "step login")):
            continue  # the Google Drive reason says it
        if problem not in excluded:
            excluded.append(problem)
    overlay = OVERLAYS / task.bench / f"{ident}.excluded"
    if overlay.is_file():  # found by validating cu-run's oracles: what this guest cannot do
        excluded.append(overlay.read_text().strip())
    fidelity = profile.fidelity(task, setup)
    if str(task.data.get("id")) != Path(task.path).stem:
        fidelity.append(f"the file's id field says {task.data.get('id')}: the task is named by its file")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir()
    (folder / UPSTREAM_FILE).write_bytes(task.raw)
    (folder / f"steps{profile.ext}").write_text(profile.helpers)
    (folder / f"setup{profile.ext}").write_text("\n".join(setup.lines) + "\n")
    (folder / f"collect{profile.ext}").write_text("\n".join(collect.lines) + "\n")
    oracle = OVERLAYS / task.bench / f"{ident}{profile.ext}"
    if oracle.is_file():
        shutil.copyfile(oracle, folder / f"oracle{profile.ext}")
        library = OVERLAYS / task.bench / f"_lib{profile.ext}"
        if library.is_file():
            shutil.copyfile(library, folder / f"oracle_lib{profile.ext}")
        report.oracles += 1
    spec: dict[str, Any] = {
        "id": ident,
        "instruction": str(task.data["instruction"]),
        "profile": profile.profile,
        "image": profile.image,
        "timeout_s": TIMEOUT_S,
        "verify_timeout_s": COLLECT_TIMEOUT_S,
        "tags": list(classification.tags),
        "scoring": "host",
        # Upstream's postconfig acts on the apps the setup opened: they must still run.
        "desktop_in_verify": True,
        # Upstream's score is its metric's alone; a write set would add a rule it does not have.
        "write_set": {"enabled": False},
        "source": {"bench": task.bench, "version": tree.version, "path": task.path, "sha256": task.sha256,
                   "upstream_id": str(task.data.get("id"))},
    }
    if classification.origins:
        # Its sites, reached through the episode's proxy: live, recorded, or replayed (docs/network.md).
        spec["network"] = {"allow": list(classification.origins)}
    if excluded:
        spec["excluded"] = excluded
        report.excluded[ident] = excluded
    if fidelity:
        spec["fidelity"] = fidelity
    (folder / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100))
    report.written += 1
    report.categories[classification.category] += 1
    report.tags.update(classification.tags)


def _copy_licence(tree: UpstreamTree, out: Path) -> None:
    for name in ("LICENSE", "LICENSE.txt", "LICENSE.md"):
        if (tree.root / name).is_file():
            shutil.copyfile(tree.root / name, out / "LICENSE")
            return
