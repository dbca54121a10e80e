"""`cu-run assets cassettes RUN_DIR --assets DIR`: a recording run's cassettes kept in the asset
store by sha256, and named in its suite's cassettes.json, which a replay reads (docs/network.md).
RUN_DIR may also be an Inspect sandbox's recording (its RECORDING file, runner.sandbox.task_vms).

Each networked task's episodes (its trials, and a validate folder's oracle and nop runs) are merged
into one cassette: each request's first answer, as a replay gives it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from runner.assets import AssetStore
from runner.errors import UsageError
from runner.network.cassette import CASSETTE, merged
from runner.records.folders import run_folders
from runner.tasks.model import SUITE_CASSETTES, load_suite


# What an Inspect sandbox that records writes in its run's folder, for keep_cassettes: the suite
# and the tasks recorded there ({"suite": PATH, "tasks": [ID, ...]}), each sample's episode folder
# being TASK/NNNN beside it, as a run's TASK/TRIAL.
RECORDING = "recording.json"


@dataclass
class Kept:
    suite: Path
    cassettes: dict[str, str] = field(default_factory=dict)  # task id -> sha256:HEX
    unrecorded: list[str] = field(default_factory=list)  # networked tasks with no episode's cassette


def keep_cassettes(run_dir: Path, store: AssetStore) -> Kept:
    recorded = _recordings(run_dir)
    if not recorded:
        raise UsageError(f"{run_dir} is not a recording: its run.json says no --net record",
                         fix="record first: cu-run run --suite S --net record --out DIR (on a connected machine)")
    suite = Path(recorded[0][1]["suite"]["path"])
    if not suite.is_dir():
        raise UsageError(f"the recording's suite folder {suite} is gone", fix="keep the cassettes where the suite is")
    kept = Kept(suite)
    tasks = dict.fromkeys(t for _run, p in recorded for t in p["network"]["tasks"])
    for task_id in tasks:
        episodes = [e for run, _p in recorded for e in sorted((run / task_id).glob(f"*/{CASSETTE}"), key=_trial)]
        if not episodes:
            kept.unrecorded.append(task_id)
            continue
        try:
            data = merged(episodes)
        except ValueError as exc:
            raise UsageError(f"task {task_id}: {exc}") from None
        digest = store.keep(data, f"cassette:{suite.name}/{task_id}", str(run_dir.resolve()))
        kept.cassettes[task_id] = f"sha256:{digest}"
    if kept.cassettes:
        _name_in_suite(suite, kept.cassettes)
    return kept


def _recordings(run_dir: Path) -> list[tuple[Path, dict]]:
    """The folders RUN_DIR stands for that recorded, each with what its run.json says (an Inspect
    sandbox's RECORDING said the same way)."""
    if (run_dir / RECORDING).is_file():
        return [(run_dir, _sandbox_recording(run_dir / RECORDING))]
    runs = run_folders(run_dir)
    provenance = [json.loads((r / "run.json").read_text()) for r in runs if (r / "run.json").is_file()]
    return [(r, p) for r, p in zip(runs, provenance, strict=False) if (p.get("network") or {}).get("mode") == "record"]


def _sandbox_recording(path: Path) -> dict:
    """What an Inspect sandbox's RECORDING at PATH says, as a run.json would: its suite, which must
    be one, and its tasks, each one of that suite's (a name of this folder, never a path)."""
    try:
        said = json.loads(path.read_text())
        suite, tasks = Path(said["suite"]), said["tasks"]
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not an Inspect sandbox's recording: {exc}",
                         fix="pass the sandbox's ARTIFACTS/RUN_ID folder of a sandbox configured net: record") from None
    known = {t.id for t in load_suite(str(suite)).tasks} if suite.is_dir() else set()
    if not known or not isinstance(tasks, list) or not all(isinstance(t, str) and t in known for t in tasks):
        raise UsageError(f"{path} names tasks that are not its suite {suite}'s: {str(tasks)[:200]}",
                         fix="keep the cassettes where the recorded suite is, unchanged")
    return {"suite": {"path": str(suite)}, "network": {"mode": "record", "tasks": tasks}}


def _trial(cassette: Path) -> int:
    name = cassette.parent.name
    return int(name) if name.isdigit() else 0


def _name_in_suite(suite: Path, cassettes: dict[str, str]) -> None:
    """SUITE's cassettes.json with CASSETTES added (the others it names kept)."""
    path = suite / SUITE_CASSETTES
    before = json.loads(path.read_text()).get("cassettes", {}) if path.is_file() else {}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"cassettes": dict(sorted({**before, **cassettes}.items()))}, indent=1) + "\n")
    tmp.replace(path)
