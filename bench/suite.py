"""Suite benchmark: the linux-core oracle suite at pool 1 and pool 2, side by side in one run.

    python bench/suite.py [--tasks a,b,...] [--pools 1,2]

Prints one JSON object: wall time per pool size, the ratio to pool 1, and the median
of each episode phase over all episodes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402

from runner.config import Settings  # noqa: E402
from runner.run import RunRequest, run_suite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="", help="comma-separated subset of linux-core [default: all]")
    parser.add_argument("--pools", default="1,2")
    args = parser.parse_args()
    settings = Settings.resolve()
    quiet = Console(file=open("/dev/null", "w"))
    tasks = tuple(t for t in args.tasks.split(",") if t)
    runs, phases = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for pool in (int(p) for p in args.pools.split(",")):
            request = RunRequest(suite="linux-core", agent="oracle", tasks=tasks, vm_pool=pool,
                                 out=Path(tmp) / f"pool{pool}")
            started = time.perf_counter()
            result = run_suite(settings, request, quiet)
            wall = time.perf_counter() - started
            outcomes = result.summary["overall"]["outcomes"]
            runs[f"pool_{pool}"] = {"wall_s": round(wall, 1), "episodes": len(result.records),
                                    "passes": outcomes["pass"], "infra_errors": outcomes["infra_error"]}
            for record in result.records:
                for phase, seconds in record.phases.items():
                    phases.setdefault(phase, []).append(seconds)
    base = runs["pool_1"]["wall_s"] if "pool_1" in runs else None
    for name, r in runs.items():
        r["speedup_vs_pool_1"] = round(base / r["wall_s"], 2) if base else None
    emit("suite", {"suite": "linux-core", "agent": "oracle", "runs": runs,
                   "phase_median_s": {k: round(statistics.median(v), 2) for k, v in phases.items()}})


if __name__ == "__main__":
    main()
