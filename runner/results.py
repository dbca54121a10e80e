"""A run's results on disk: one JSON line per finished episode, appended as each ends.

An interrupted run loses at most the episodes in flight; `--resume` reads the file back
and redoes only what has no line (infra errors included: they were never scored).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

Outcome = Literal["pass", "fail", "timeout", "agent_error", "verifier_error", "infra_error"]
OUTCOMES: tuple[Outcome, ...] = ("pass", "fail", "timeout", "agent_error", "verifier_error", "infra_error")
RESULTS = "results.jsonl"


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


class ResultLog:
    def __init__(self, out_dir: Path) -> None:
        self.path = out_dir / RESULTS
        self._lock = threading.Lock()

    def append(self, record: EpisodeRecord) -> None:
        line = json.dumps(asdict(record)) + "\n"
        with self._lock, self.path.open("a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def records(self) -> list[EpisodeRecord]:
        """Every readable line; a line torn by a crash mid-write is skipped."""
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text().splitlines():
            try:
                found.append(EpisodeRecord(**json.loads(line)))
            except (ValueError, TypeError):
                continue
        return found

    def finished(self) -> set[tuple[str, int]]:
        """(task, trial) pairs with a scored outcome; the latest line for a pair wins."""
        return {(r.task_id, r.trial) for r in self.latest() if r.outcome != "infra_error"}

    def latest(self) -> list[EpisodeRecord]:
        """One record per (task, trial), the last written, sorted."""
        latest: dict[tuple[str, int], EpisodeRecord] = {}
        for r in self.records():
            latest[(r.task_id, r.trial)] = r
        return sorted(latest.values(), key=lambda r: (r.task_id, r.trial))


def summarize(records: list[EpisodeRecord], task_ids: list[str]) -> dict:
    """Per task and overall: passes over trials, the rate, and every outcome counted."""
    per_task = {}
    for task_id in task_ids:
        mine = [r for r in records if r.task_id == task_id]
        per_task[task_id] = _counts(mine)
    return {"tasks": per_task, "overall": _counts(records)}


def _counts(records: list[EpisodeRecord]) -> dict:
    counts = {o: sum(1 for r in records if r.outcome == o) for o in OUTCOMES}
    # Infra errors are not the agent's: they are left out of the rate's denominator.
    scored = len(records) - counts["infra_error"]
    return {"episodes": len(records), "scored": scored, "passes": counts["pass"],
            "rate": round(counts["pass"] / scored, 4) if scored else None, "outcomes": counts}
