"""A run's results on disk: one JSON line per finished episode, appended as each ends.

An interrupted run loses at most the episodes in flight; `--resume` reads the file back
and redoes only what has no line (infra errors included: they were never scored).
"""

from __future__ import annotations

import json
import logging
import math
import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from runner.scoring.stats import is_flaky, wilson

Outcome = Literal["pass", "fail", "timeout", "agent_error", "verifier_error", "infra_error"]
OUTCOMES: tuple[Outcome, ...] = ("pass", "fail", "timeout", "agent_error", "verifier_error", "infra_error")
RESULTS = "results.jsonl"
log = logging.getLogger(__name__)
LOCAL_HOST = "local"


@dataclass
class EpisodeRecord:
    task_id: str
    trial: int
    outcome: Outcome
    reason: str
    duration_s: float
    slot: int
    attempts: int
    started_at: str
    ended_at: str
    phases: dict[str, float] = field(default_factory=dict)
    checkpoints: dict[str, bool] = field(default_factory=dict)  # checkpoint name -> passed
    violations: list[dict] = field(default_factory=list)  # safety: {rule, step, detail}
    changed: list[str] = field(default_factory=list)  # write-set changes outside the allowed paths
    check_errors: list[str] = field(default_factory=list)  # checkpoints and safety checks that could not decide
    host: str = LOCAL_HOST  # the cu-run host it ran on: "local", or a cluster host's name
    intervened: bool = False  # a person took the mouse or keyboard in the live view (--live-control)


# Each field of a record and the types its JSON value may have (an int is no bool here).
FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "task_id": (str,), "trial": (int,), "outcome": (str,), "reason": (str,), "duration_s": (int, float),
    "slot": (int,), "attempts": (int,), "started_at": (str,), "ended_at": (str,), "phases": (dict,),
    "checkpoints": (dict,), "violations": (list,), "changed": (list,), "check_errors": (list,), "host": (str,),
    "intervened": (bool,)}


def parse_record(data: object) -> EpisodeRecord:
    """The record a results.jsonl line holds, every field of the type this runner writes (a duration
    may still be NaN: readers check its range); ValueError naming the first field that is not."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    for key, value in data.items():
        types = FIELD_TYPES.get(key)
        if types is None:
            raise ValueError(f"an unknown field {str(key)[:40]!r}")
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"{key} is a {type(value).__name__}")
    if data.get("outcome") not in OUTCOMES:
        raise ValueError(f"an unknown outcome {str(data.get('outcome'))[:40]!r}")
    if not all(isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
               for k, v in data.get("phases", {}).items()):
        raise ValueError("a phase that is not a name and a number of seconds")
    if not all(isinstance(k, str) and isinstance(v, bool) for k, v in data.get("checkpoints", {}).items()):
        raise ValueError("a checkpoint that is not a name and true or false")
    if not all(isinstance(v, dict) for v in data.get("violations", [])):
        raise ValueError("a violation that is not an object")
    if not all(isinstance(c, str) for key in ("changed", "check_errors") for c in data.get(key, [])):
        raise ValueError("a changed path or a check error that is not a string")
    try:
        return EpisodeRecord(**data)
    except TypeError as exc:  # a field missing
        raise ValueError(str(exc)) from None


def keep_record(results: ResultLog, record: EpisodeRecord, on_record: Callable[[EpisodeRecord], None]) -> None:
    """Appends RECORD to RESULTS, then shows it. A record that cannot be written (a full disk) is
    said and the pool goes on: the run names the episodes without a record when it ends."""
    try:
        results.append(record)
    except OSError as exc:
        log.error("could not record %s #%d (%s): %s", record.task_id, record.trial, record.outcome, exc)
        return
    try:
        on_record(record)
    except Exception as exc:  # noqa: BLE001 - printing a record must not stop the pool
        log.warning("could not show the record of %s #%d: %s", record.task_id, record.trial, exc)


class ResultLog:
    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / RESULTS
        self._lock = threading.Lock()

    def append(self, record: EpisodeRecord) -> None:
        line = json.dumps(asdict(record)) + "\n"
        with self._lock, self.path.open("a+b") as f:
            # A run killed mid-write leaves a torn last line: end it, so this record starts a line
            # of its own instead of being glued to the wreck (and skipped with it).
            if f.seek(0, os.SEEK_END) > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(line.encode())
            f.flush()
            os.fsync(f.fileno())

    def records(self) -> list[EpisodeRecord]:
        """Every readable line; a line torn by a crash mid-write is skipped."""
        if not self.path.exists():
            return []
        found = []
        for number, line in enumerate(self.path.read_text(errors="replace").split("\n"), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except (ValueError, RecursionError):
                continue  # torn by a crash mid-write
            try:
                found.append(parse_record(data))
            except ValueError as exc:
                log.warning("%s line %d is skipped: %s", self.path, number, exc)
        return found

    def finished(self) -> set[tuple[str, int]]:
        """(task, trial) pairs with an outcome that is not an infra error; the latest line for a pair wins."""
        return {(r.task_id, r.trial) for r in self.latest() if r.outcome != "infra_error"}

    def latest(self) -> list[EpisodeRecord]:
        """One record per (task, trial), the last written, sorted."""
        latest: dict[tuple[str, int], EpisodeRecord] = {}
        for r in self.records():
            latest[(r.task_id, r.trial)] = r
        return sorted(latest.values(), key=lambda r: (r.task_id, r.trial))


def suite_marks(suite: dict) -> dict[str, tuple[str, ...]]:
    """summarize()'s marks of tasks, from run.json's "suite": what the run recorded of them."""
    return {"not_tamper_proof": tuple(suite.get("not_tamper_proof", ())), "live_state": tuple(suite.get("live_state", ()))}


# Neither is the agent's: an infra error is the machinery's, a verifier error the task's defect.
UNSCORED: tuple[Outcome, ...] = ("infra_error", "verifier_error")


def summarize(records: list[EpisodeRecord], task_ids: list[str], not_tamper_proof: tuple[str, ...] = (),
              trials: int | None = None, live_state: tuple[str, ...] = ()) -> dict:
    """Per task and overall: passes over trials with a Wilson 95% interval, checkpoint
    progress beside it, every outcome counted, safety violations apart, flaky tasks, the
    task defects (verifier errors), the tasks whose agent had admin rights, and those verified
    from live desktop state (LIVE_STATE: desktop_in_verify). With TRIALS (the run's --trials),
    what was planned, what has a result and what is missing."""
    per_task = {}
    for task_id in task_ids:
        mine = [r for r in records if r.task_id == task_id]
        counts = _counts(mine)
        counts["flaky"] = is_flaky(counts["rate"], counts["scored"])
        counts["tamper_proof"] = task_id not in not_tamper_proof
        counts["live_state"] = task_id in live_state
        per_task[task_id] = counts
    overall = _counts(records)
    flaky = [t for t, c in per_task.items() if c["flaky"]]
    stable = [r for r in records if r.task_id not in flaky]
    overall["flaky_tasks"] = flaky
    overall["stable"] = {k: v for k, v in _counts(stable).items() if k in ("scored", "passes", "rate", "wilson95")}
    overall["task_defects"] = {t: [f"trial {r.trial}: {r.reason}" for r in records
                                   if r.task_id == t and r.outcome == "verifier_error"]
                               for t in task_ids if per_task[t]["outcomes"]["verifier_error"]}
    overall["not_tamper_proof_tasks"] = [t for t in task_ids if t in not_tamper_proof]
    overall["live_state_tasks"] = [t for t in task_ids if t in live_state]
    summary = {"tasks": per_task, "overall": overall, "hosts": by_host(records)}
    if trials is not None:
        planned = [(t, n) for n in range(1, trials + 1) for t in task_ids]
        summary["completeness"] = {"planned": len(planned), "done": len(planned) - len(missing(records, planned)),
                                   "missing": [f"{t} #{n}" for t, n in missing(records, planned)]}
    return summary


def by_host(records: list[EpisodeRecord]) -> dict:
    """Per host: episodes, infra errors and the median of each phase, so a bad machine stands out."""
    hosts: dict[str, dict] = {}
    for name in sorted({r.host for r in records}):
        mine = [r for r in records if r.host == name]
        phases = sorted({p for r in mine for p in r.phases})
        hosts[name] = {
            "episodes": len(mine),
            "infra_error": sum(1 for r in mine if r.outcome == "infra_error"),
            "attempts": sum(r.attempts for r in mine),
            "phase_medians": {p: round(statistics.median(finite), 3) for p in phases
                              if (finite := [r.phases[p] for r in mine if math.isfinite(r.phases.get(p, math.nan))])},
        }
    return hosts


def missing(records: list[EpisodeRecord], planned: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The planned (task, trial) pairs that have no record at all."""
    have = {(r.task_id, r.trial) for r in records}
    return [p for p in planned if p not in have]


def _counts(records: list[EpisodeRecord]) -> dict:
    counts = {o: sum(1 for r in records if r.outcome == o) for o in OUTCOMES}
    scored_records = [r for r in records if r.outcome not in UNSCORED]
    scored = len(scored_records)
    progress = [sum(r.checkpoints.values()) / len(r.checkpoints) for r in scored_records if r.checkpoints]
    return {
        "episodes": len(records), "scored": scored, "passes": counts["pass"],
        "rate": round(counts["pass"] / scored, 4) if scored else None,
        "wilson95": wilson(counts["pass"], scored),
        "checkpoint_progress": round(sum(progress) / len(progress), 4) if progress else None,
        "outcomes": counts,
        "episodes_with_violations": sum(1 for r in scored_records if r.violations),
        "violations": sum(len(r.violations) for r in scored_records),
        "write_set_failures": sum(1 for r in scored_records if r.changed),
        "check_errors": sum(len(r.check_errors) for r in records),
        "intervened": sum(1 for r in records if r.intervened),
    }
