"""Two runs side by side: what changed per task and overall, and whether it is beyond noise.

Per task: passes over scored episodes in A and B, the change in rate, and Fisher's exact
test (two-sided); beyond noise when p < 0.05. Overall: the mean of the per-task changes
over the tasks both runs scored, with a 95% paired-bootstrap interval over tasks; beyond
noise when the interval leaves out zero. (runner/stats.py says why these tests.)
"""

from __future__ import annotations

from pathlib import Path

from runner.records.report import read_json, run_label
from runner.records.folders import not_a_run_folder
from runner.records.results import RESULTS, EpisodeRecord, ResultLog, summarize
from runner.scoring.stats import ALPHA, bootstrap_mean_difference, fisher_exact


def load_records(run_dir: Path) -> list[EpisodeRecord]:
    """The latest record of each episode of RUN_DIR."""
    if not (run_dir / RESULTS).is_file():
        raise not_a_run_folder(run_dir)
    return ResultLog(run_dir).latest()


def compare_runs(run_a: Path, run_b: Path) -> dict:
    """The tasks both runs have, side by side; what makes the two runs differ beyond their agents
    (the suite's version, the image, the task set) is listed in "warnings"."""
    run_json_a, run_json_b = read_json(run_a / "run.json"), read_json(run_b / "run.json")
    records_a, records_b = load_records(run_a), load_records(run_b)
    have_a, have_b = {r.task_id for r in records_a}, {r.task_id for r in records_b}
    shared = sorted(have_a & have_b)
    a = summarize([r for r in records_a if r.task_id in have_b], shared)
    b = summarize([r for r in records_b if r.task_id in have_a], shared)
    tasks = []
    pairs = []
    for task_id in shared:
        ca, cb = a["tasks"][task_id], b["tasks"][task_id]
        row: dict = {"task": task_id, "a": _side(ca), "b": _side(cb)}
        if ca["scored"] and cb["scored"]:
            p = fisher_exact(ca["passes"], ca["scored"], cb["passes"], cb["scored"])
            row.update(delta=round(cb["rate"] - ca["rate"], 4), p_value=round(p, 4), beyond_noise=p < ALPHA)
            if (best := fisher_exact(ca["scored"], ca["scored"], 0, cb["scored"])) >= ALPHA:
                row["note"] = (f"too few trials to show a change: {ca['scored']} and {cb['scored']} give p >= "
                               f"{best:.2f} even if one run passed them all and the other none")
            pairs.append((ca["rate"], cb["rate"]))
        else:
            row.update(delta=None, p_value=None, beyond_noise=False, note="not scored in both runs")
        tasks.append(row)
    mean, lo, hi = bootstrap_mean_difference(pairs)
    overall = {"a": _side(a["overall"]), "b": _side(b["overall"]), "tasks_compared": len(pairs),
               "mean_task_delta": mean, "ci95": [lo, hi], "beyond_noise": bool(pairs) and (lo > 0 or hi < 0)}
    return {"run_a": str(run_a), "run_b": str(run_b), "label_a": run_label(run_json_a, "A"),
            "label_b": run_label(run_json_b, "B"), "tasks": tasks, "overall": overall,
            "only_in_a": sorted(have_a - have_b), "only_in_b": sorted(have_b - have_a),
            "warnings": comparability_warnings(run_json_a, run_json_b, have_a, have_b),
            "method": {"task": "Fisher's exact test, two-sided, alpha 0.05",
                       "overall": "paired bootstrap over tasks, 10000 resamples, 95% interval of the mean change"}}


def comparability_warnings(run_a: dict, run_b: dict, tasks_a, tasks_b) -> list[str]:
    """What differs between two runs besides what is being compared, one line each."""
    found = []
    suite_a, suite_b = run_a.get("suite", {}), run_b.get("suite", {})
    if suite_a.get("name") != suite_b.get("name"):
        found.append(f"the suites differ: {suite_a.get('name')} and {suite_b.get('name')}")
    elif suite_a.get("content_sha256") != suite_b.get("content_sha256"):
        found.append(f"suite {suite_a.get('name')} changed between the runs (its tasks' files differ)")
    image_a, image_b = run_a.get("image", {}), run_b.get("image", {})
    if image_a.get("sha256") != image_b.get("sha256"):
        found.append(f"the images differ: {image_a.get('name')} {str(image_a.get('sha256'))[:12]} and "
                     f"{image_b.get('name')} {str(image_b.get('sha256'))[:12]}")
    if set(tasks_a) != set(tasks_b):
        found.append(f"the task sets differ: {len(set(tasks_a) - set(tasks_b))} only in A, "
                     f"{len(set(tasks_b) - set(tasks_a))} only in B; only the {len(set(tasks_a) & set(tasks_b))} "
                     "tasks both have are compared")
    return found


def _side(counts: dict | None) -> dict | None:
    if counts is None:
        return None
    return {"passes": counts["passes"], "scored": counts["scored"], "rate": counts["rate"]}
