"""OSWorld's offline tasks, imported and scored on the host, run warm at pool 1 and pool 2 side by
side in one run (docs/benchmarks.md):

    python bench/benchmark_suite.py [--source ../shared/data/osworld-f6cee71] [--pools 1,2] [--tasks ID,...]

The suite is imported into a scratch folder; the tasks are those tagged `offline` that run here
(none excluded) and have a cu-run oracle, which plays the agent. Per pool: episodes a minute, the
median overhead outside the agent, and per episode the median setup, the verify phase (the
collector in the guest, the pull, the sandboxed metric) and the metric's own time in the sandbox.

OSWorld's own runner sleeps 60 s after setup and 20 s before it scores, whatever the task: that
is 80 s of every episode spent outside the agent before its setup or scoring does anything, the
figure to compare the overhead with.

Needs linux-desktop and two warm slots (cu-run image warm linux-desktop --slots 2), and the
scoring venv (cu-run scoring env). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, warm_oracle_run

from runner.config import Settings
from runner.tasks.model import TagFilter, load_suite

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "data" / "osworld-f6cee71"
OSWORLD_SLEEPS_S = 60 + 20  # its runner: after setup, and before scoring


def import_offline(settings: Settings, source: Path, out: Path) -> tuple[str, ...]:
    """Imports SOURCE into OUT; the offline tasks that run here, that the scoring env can score,
    and that have an oracle."""
    from runner.benchmarks.host_scoring import metric_problems
    from runner.benchmarks.importer import import_tree
    from runner.benchmarks.scoring_env import ensure_env

    import_tree("osworld", source, out)
    tasks = [t for t in load_suite(str(out)).select(None, TagFilter(include=(("offline",),)))
             if (t.folder / "oracle.sh").is_file()]
    unscorable = {p.split(": ", 1)[0] for p in metric_problems(ensure_env(settings.cache_dir), tasks)}
    return tuple(t.id for t in tasks if t.id not in unscorable)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def per_episode(out_dir: Path, records) -> dict:
    """The medians of one pool's episodes: overhead, setup, verify, and the metric in the sandbox."""
    metric = []
    for r in records:
        scored = out_dir / r.task_id / str(r.trial) / "scoring.json"
        if scored.is_file():
            metric.append(json.loads(scored.read_text()).get("seconds", 0.0))
    return {"overhead_median_s": _median([r.duration_s - r.phases.get("agent", 0.0) for r in records]),
            "agent_median_s": _median([r.phases["agent"] for r in records if "agent" in r.phases]),
            "setup_median_s": _median([r.phases["setup"] for r in records if "setup" in r.phases]),
            "verify_median_s": _median([r.phases["verify"] for r in records if "verify" in r.phases]),
            "metric_in_sandbox_median_s": _median(metric)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="an OSWorld checkout's tree")
    parser.add_argument("--pools", default="1,2")
    parser.add_argument("--tasks", default="", help="comma-separated ids [default: every offline task with an oracle]")
    args = parser.parse_args()
    settings = Settings.resolve()
    pools: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "osworld"
        offline = import_offline(settings, args.source, suite)
        tasks = tuple(t for t in args.tasks.split(",") if t) or offline
        for pool in (int(p) for p in args.pools.split(",")):
            out = Path(tmp) / f"pool_{pool}"
            result, counts = warm_oracle_run(settings, pool, out, tasks=tasks, suite=str(suite))
            pools[f"pool_{pool}"] = {**counts, **per_episode(out, result.records),
                                     "not_passed": sorted(r.task_id for r in result.records if r.outcome != "pass")}
    overheads = {k: v["overhead_median_s"] for k, v in pools.items() if v["overhead_median_s"] is not None}
    emit("benchmark_suite", {
        "suite": f"osworld offline ({args.source.name})", "agent": "oracle", "start": "warm", "tasks": len(tasks),
        "pools": pools,
        "osworld_runner_sleeps_s": OSWORLD_SLEEPS_S,
        "overhead_vs_osworld_sleeps": {k: round(v / OSWORLD_SLEEPS_S, 3) for k, v in overheads.items()},
    })


if __name__ == "__main__":
    main()
