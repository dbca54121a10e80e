"""Suite benchmark: the linux-core oracle suite, cold and warm starts at pool 1 and pool 2,
side by side in one run.

    python bench/suite.py [--tasks a,b,...] [--pools 1,2] [--starts cold,warm]

Warm runs need warm states for the largest pool (cu-run image warm linux-test --slots 2).
Prints one JSON object: wall time per (start, pool), the speedup over cold pool 1, and
the median of each episode phase per start mode.
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
from common import emit

from runner.config import Settings
from runner.runs.request import RunRequest
from runner.runs.run import run_suite


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="", help="comma-separated subset of linux-core [default: all]")
    parser.add_argument("--pools", default="1,2")
    parser.add_argument("--starts", default="cold,warm")
    args = parser.parse_args()
    settings = Settings.resolve()
    quiet = Console(file=open("/dev/null", "w"))
    tasks = tuple(t for t in args.tasks.split(",") if t)
    runs: dict[str, dict] = {}
    phases: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for start in args.starts.split(","):
            for pool in (int(p) for p in args.pools.split(",")):
                name = f"{start}_pool_{pool}"
                request = RunRequest.of("linux-core", "oracle", tasks=tasks, vm_pool=pool,
                                     out=Path(tmp) / name, start=start)
                started = time.perf_counter()
                result = run_suite(settings, request, quiet)
                wall = time.perf_counter() - started
                outcomes = result.summary["overall"]["outcomes"]
                runs[name] = {"wall_s": round(wall, 1), "episodes": len(result.records),
                              "passes": outcomes["pass"], "infra_errors": outcomes["infra_error"]}
                for record in result.records:
                    for phase, seconds in record.phases.items():
                        phases.setdefault(start, {}).setdefault(phase, []).append(seconds)
    base = runs.get("cold_pool_1", {}).get("wall_s")
    for r in runs.values():
        r["speedup_vs_cold_pool_1"] = round(base / r["wall_s"], 2) if base else None
    emit("suite", {"suite": "linux-core", "agent": "oracle", "runs": runs,
                   "phase_median_s": {start: {k: round(statistics.median(v), 2) for k, v in by_phase.items()}
                                      for start, by_phase in phases.items()}})


if __name__ == "__main__":
    main()
