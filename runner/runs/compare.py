"""Two runs side by side: what changed per task and overall, and whether it is beyond noise.

Per task: passes over scored episodes in A and B, the change in rate, and Fisher's exact
test (two-sided); beyond noise when p < 0.05. Overall: the mean of the per-task changes
over the tasks both runs scored, with a 95% paired-bootstrap interval over tasks; beyond
noise when the interval leaves out zero. (runner/stats.py says why these tests.)
"""

from __future__ import annotations

from pathlib import Path

from runner.errors import UsageError
from runner.runs.results import RESULTS, ResultLog, summarize
from runner.scoring.stats import ALPHA, bootstrap_mean_difference, fisher_exact


def load_summary(run_dir: Path) -> dict:
    if not (run_dir / RESULTS).is_file():
        raise UsageError(f"{run_dir} holds no {RESULTS}: not a cu-run run folder",
                         fix="pass the --out folder of a run (runs/<suite>-<agent>-<time>)")
    records = ResultLog(run_dir).latest()
    return summarize(records, sorted({r.task_id for r in records}))


def compare_runs(run_a: Path, run_b: Path) -> dict:
    a, b = load_summary(run_a), load_summary(run_b)
    tasks = []
    pairs = []
    for task_id in sorted(a["tasks"].keys() | b["tasks"].keys()):
        ca, cb = a["tasks"].get(task_id), b["tasks"].get(task_id)
        row: dict = {"task": task_id,
                     "a": _side(ca), "b": _side(cb)}
        if ca and cb and ca["scored"] and cb["scored"]:
            p = fisher_exact(ca["passes"], ca["scored"], cb["passes"], cb["scored"])
            row.update(delta=round(cb["rate"] - ca["rate"], 4), p_value=round(p, 4), beyond_noise=p < ALPHA)
            pairs.append((ca["rate"], cb["rate"]))
        else:
            row.update(delta=None, p_value=None, beyond_noise=False, note="not scored in both runs")
        tasks.append(row)
    mean, lo, hi = bootstrap_mean_difference(pairs)
    overall = {"a": _side(a["overall"]), "b": _side(b["overall"]), "tasks_compared": len(pairs),
               "mean_task_delta": mean, "ci95": [lo, hi], "beyond_noise": bool(pairs) and (lo > 0 or hi < 0)}
    return {"run_a": str(run_a), "run_b": str(run_b), "tasks": tasks, "overall": overall,
            "method": {"task": "Fisher's exact test, two-sided, alpha 0.05",
                       "overall": "paired bootstrap over tasks, 10000 resamples, 95% interval of the mean change"}}


def _side(counts: dict | None) -> dict | None:
    if counts is None:
        return None
    return {"passes": counts["passes"], "scored": counts["scored"], "rate": counts["rate"]}
