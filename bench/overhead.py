"""Per-episode overhead: what an episode spends outside the agent, warm starts, the linux-core
oracle suite at pool 1 and pool 2, side by side in one run.

    python bench/overhead.py [--pools 1,2] [--trials 1] [--admin agent,ssh] [--standby on,off]

Needs warm states for the largest pool (cu-run image warm linux-test --slots 2), and spare ones
for standby VMs (--slots 4 gives pool 2 two spares). Prints one
JSON object: per pool, the median of each phase, the median overhead (the episode's
duration minus its agent phase), and how long a slot waits between the end of one episode
and the start of the next.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, warm_oracle_run

from runner.config import Settings


def overhead_of(records) -> dict:
    phases: dict[str, list[float]] = {}
    for record in records:
        for phase, seconds in record.phases.items():
            phases.setdefault(phase, []).append(seconds)
    overheads = [r.duration_s - r.phases.get("agent", 0.0) for r in records]
    return {"phase_median_s": {k: round(statistics.median(v), 2) for k, v in phases.items()},
            "overhead_median_s": round(statistics.median(overheads), 2),
            "overhead_p90_s": round(sorted(overheads)[int(0.9 * (len(overheads) - 1))], 2),
            "slot_gap_median_s": _slot_gap(records)}


def after_first(records) -> dict:
    """The episodes after each slot's first: how many started on a standby, and their overhead."""
    later = []
    by_slot: dict[int, list] = {}
    for r in records:
        by_slot.setdefault(r.slot, []).append(r)
    for mine in by_slot.values():
        later += sorted(mine, key=lambda r: r.started_at)[1:]
    if not later:
        return {}
    overheads = sorted(r.duration_s - r.phases.get("agent", 0.0) for r in later)
    return {"after_first_from_standby": f"{sum('standby_restore' in r.phases for r in later)}/{len(later)}",
            "after_first_overhead_median_s": round(statistics.median(overheads), 2),
            "after_first_overhead_p90_s": round(overheads[int(0.9 * (len(overheads) - 1))], 2)}


def _slot_gap(records) -> float | None:
    """Seconds between one episode's end on a slot and the next one's start on it."""
    gaps = []
    by_slot: dict[int, list] = {}
    for r in records:
        by_slot.setdefault(r.slot, []).append(r)
    for mine in by_slot.values():
        mine.sort(key=lambda r: r.started_at)
        for before, after in zip(mine, mine[1:], strict=False):
            gaps.append((datetime.fromisoformat(after.started_at) - datetime.fromisoformat(before.ended_at)).total_seconds())
    return round(statistics.median(gaps), 2) if gaps else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pools", default="1,2")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--tasks", default="", help="comma-separated subset of linux-core [default: all]")
    parser.add_argument("--admin", default="", help="admin channels to compare, e.g. agent,ssh [default: the default]")
    parser.add_argument("--standby", default="on", help="standby VMs, e.g. on,off to compare [default: on]")
    args = parser.parse_args()
    standbys = [s == "on" for s in args.standby.split(",")]
    channels = [c for c in args.admin.split(",") if c] or [None]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pool in (int(p) for p in args.pools.split(",")):
            for channel in channels:
                for standby in standbys:
                    if channel:
                        os.environ["CU_RUN_ADMIN_CHANNEL"] = channel
                    settings = Settings.resolve()  # which reads the channel
                    name = (f"pool_{pool}" + (f"_{channel}" if channel else "")
                            + ("" if len(standbys) == 1 else "_standby" if standby else "_no_standby"))
                    result, counts = warm_oracle_run(settings, pool, Path(tmp) / name, args.trials,
                                                     tuple(t for t in args.tasks.split(",") if t), standby)
                    results[name] = {**counts, **overhead_of(result.records),
                                     "standby_used": sum("standby_restore" in r.phases for r in result.records),
                                     **after_first(result.records)}
    emit("overhead", {"suite": "linux-core", "agent": "oracle", "start": "warm", "target_overhead_s": 5.0,
                      "pools": results})


if __name__ == "__main__":
    main()
