"""Shared bits of the benchmarks: statistics and the JSON they print."""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from collections.abc import Callable

from runner import __version__


def summarize(samples: list[float]) -> dict:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(samples), "median_s": round(statistics.median(samples), 4), "p95_s": round(p95, 4),
            "min_s": round(ordered[0], 4), "max_s": round(ordered[-1], 4)}


def timed(action: Callable[[], object], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def emit(name: str, results: dict) -> None:
    report = {"benchmark": name, "runner_version": __version__, "host": platform.node(),
              "python": sys.version.split()[0], **results}
    print(json.dumps(report, indent=2))


def warm_oracle_run(settings, pool: int, out, trials: int = 1, tasks: tuple[str, ...] = (),
                    standby: bool = True, suite: str = "linux-core") -> tuple[object, dict]:
    """SUITE's oracle, warm, at POOL: the RunResult, and its wall time, episodes a minute, passes
    and infra errors."""
    from rich.console import Console

    from runner.runs.request import RunRequest
    from runner.runs.run import run_suite

    request = RunRequest.of(suite, "oracle", vm_pool=pool, trials=trials, tasks=tasks, out=out,
                         start="warm", standby=standby)
    started = time.perf_counter()
    result = run_suite(settings, request, Console(file=open("/dev/null", "w")))
    wall = time.perf_counter() - started
    outcomes = result.summary["overall"]["outcomes"]
    return result, {"wall_s": round(wall, 1), "episodes": len(result.records),
                    "episodes_per_min": round(60 * len(result.records) / wall, 2),
                    "passes": outcomes["pass"], "infra_errors": outcomes["infra_error"]}


def pss_mib(pid: int) -> float:
    """A process's proportional set size (QEMU's): its private pages plus its share of the shared ones."""
    from pathlib import Path

    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no Pss in /proc/{pid}/smaps_rollup")
