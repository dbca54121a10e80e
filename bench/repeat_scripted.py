"""Repeat check: the scripted agent's GUI solutions, many trials in a row at pool 2, on a quiet
host and beside a busy loop that burns a core (a stand-in for a slower host).

    python bench/repeat_scripted.py [--trials 5] [--pool 2] [--burn 0,1] [--tasks a,b,c]

A GUI script that waits for fixed times passes on a fast host and fails on a slow one; one
that waits for conditions passes on both. Prints one JSON object: per burn level, the passes
of each task out of its trials, and the reason of every episode that did not pass.
"""

from __future__ import annotations

import argparse
import multiprocessing
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

TASKS = "editor-write-save,folder-tree,calc-to-file"


def burn(stop) -> None:
    """Spins one core until STOP is set: a host slower by the share of the CPU it takes."""
    while not stop.is_set():
        for _ in range(100_000):
            pass


def one_level(settings: Settings, tasks: tuple[str, ...], trials: int, pool: int, burners: int, out: Path) -> dict:
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=burn, args=(stop,), daemon=True) for _ in range(burners)]
    for spinner in spinners:
        spinner.start()
    try:
        request = RunRequest.of("linux-core", "scripted", tasks=tasks, vm_pool=pool, trials=trials, out=out)
        started = time.perf_counter()
        result = run_suite(settings, request, Console(file=open("/dev/null", "w")))
        wall = time.perf_counter() - started
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()
    passes = {t: 0 for t in tasks}
    misses = []
    for record in result.records:
        if record.outcome == "pass":
            passes[record.task_id] += 1
        else:
            misses.append({"task": record.task_id, "trial": record.trial, "outcome": record.outcome,
                           "reason": record.reason})
    return {"wall_s": round(wall, 1), "trials_per_task": trials, "passes": passes,
            "all_passed": not misses and all(p == trials for p in passes.values()), "not_passed": misses}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--burn", default="0,1", help="busy cores beside the run, one run per value")
    args = parser.parse_args()
    settings = Settings.resolve()
    tasks = tuple(t for t in args.tasks.split(",") if t)
    levels = {}
    with tempfile.TemporaryDirectory() as tmp:
        for burners in (int(b) for b in args.burn.split(",")):
            levels[f"burn_{burners}"] = one_level(settings, tasks, args.trials, args.pool, burners,
                                                  Path(tmp) / f"burn-{burners}")
    emit("repeat_scripted", {"suite": "linux-core", "agent": "scripted", "pool": args.pool, "runs": levels})


if __name__ == "__main__":
    main()
