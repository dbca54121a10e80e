"""`cu-run rescore RUN [--evaluators SOURCE] --out RUN2`: a run's imported tasks scored again from
what each episode collected, with (other) evaluators, in the same sandbox, no agent rerun.

Labs do this when a benchmark revises its evaluators. RUN2 starts as a copy of RUN; each
episode that reached its scoring (pass, fail or verifier_error, with a `collected/` folder) is
scored again from its own copy of the task's upstream.json, and gets a new line in
results.jsonl when its outcome or score changes. Timeouts, agent errors and infra errors
stay as they were: nothing of theirs was scored. RUN itself is never written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from runner.assets import AssetStore, assets_root
from runner.benchmarks.task_assets import urls_of
from runner.benchmarks.host_scoring import COLLECTED, EPISODE_UPSTREAM, HostScoring, score_collected_from
from runner.benchmarks.scoring_env import ensure_env
from runner.errors import UsageError
from runner.records.folders import is_run_folder, not_a_run_folder
from runner.records.report import write_reports
from runner.records.results import Outcome, ResultLog, suite_marks, summarize

RESCORED = ("pass", "fail", "verifier_error")


@dataclass
class Rescored:
    episodes: int = 0
    changed: list[str] | None = None


def _frozen_clocks(run: Path) -> dict[str, datetime]:
    """The tasks' frozen clocks as the run recorded them (run.json): a rescore scores at the same
    instant. Read from the run's own record, never from the guest's output."""
    if not (run / "run.json").is_file():
        return {}
    try:
        recorded = json.loads((run / "run.json").read_text()).get("suite", {}).get("clock", {})
        return {task: datetime.fromisoformat(value) for task, value in recorded.items()}
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise UsageError(f"{run}/run.json: its frozen clocks cannot be read: {exc}") from exc


def rescore_run(run: Path, out: Path, cache_dir: Path, evaluators: str | None, assets: Path | None,
                say: Callable[[str], None] = lambda _m: None) -> Rescored:
    if not is_run_folder(run):
        raise not_a_run_folder(run)
    if out.exists():
        raise UsageError(f"{out} already exists", fix="choose a new --out folder; the rescored run is a copy")
    records = ResultLog(run).latest()
    scorable = [r for r in records if r.outcome in RESCORED and (run / r.task_id / str(r.trial) / COLLECTED).is_dir()]
    if not scorable:
        raise UsageError(f"{run} has no episode with collected output to score again",
                         fix="rescore a run of imported tasks (cu-run tasks import) that reached their scoring")
    env = ensure_env(cache_dir, evaluators, say=say)
    gold_urls = sorted({u for r in scorable for u in urls_of(_upstream(run, r.task_id, r.trial)).host})
    blobs: dict[str, Path] = {}
    if gold_urls:
        root = assets_root(assets)
        if root is None:
            raise UsageError(f"the episodes' metrics read {len(gold_urls)} gold files, and no asset store was given",
                             fix="pass --assets DIR (the run's store), or set CU_RUN_ASSETS")
        blobs, problems = AssetStore(root).resolve(gold_urls)
        if problems:
            raise UsageError("the asset store lacks gold files:\n  " + "\n  ".join(problems[:20]))
    scoring = HostScoring(env, blobs)
    shutil.copytree(run, out, symlinks=True)
    log = ResultLog(out)
    result = Rescored(changed=[])
    clocks = _frozen_clocks(run)
    for number, record in enumerate(scorable, 1):
        ep_dir = out / record.task_id / str(record.trial)
        before = _score_of(ep_dir)
        verdict, _details, checkpoints = score_collected_from(scoring, json.loads((ep_dir / EPISODE_UPSTREAM).read_bytes()),
                                                              ep_dir, clock=clocks.get(record.task_id))
        outcome: Outcome = "pass" if verdict.kind == "pass" else "fail" if verdict.kind == "fail" else "verifier_error"
        after = _score_of(ep_dir)
        say(f"[{number}/{len(scorable)}] {record.task_id} #{record.trial}: {record.outcome} -> {outcome}")
        result.episodes += 1
        if outcome != record.outcome or after != before:
            assert result.changed is not None
            result.changed.append(f"{record.task_id} #{record.trial}: {record.outcome} ({before}) -> {outcome} ({after})")
            log.append(replace(record, outcome=outcome, reason=verdict.reason, checkpoints=checkpoints))
    _finish(run, out, env.provenance())
    return result


def _upstream(run: Path, task_id: str, trial: int) -> dict:
    path = run / task_id / str(trial) / EPISODE_UPSTREAM
    if not path.is_file():
        raise UsageError(f"{path} is missing: the episode keeps no copy of its task's evaluator")
    return json.loads(path.read_bytes())


def _score_of(ep_dir: Path) -> float | None:
    try:
        return json.loads((ep_dir / "scoring.json").read_text()).get("score")
    except (OSError, ValueError):
        return None


def _finish(run: Path, out: Path, evaluators: dict) -> None:
    provenance = json.loads((out / "run.json").read_text())
    provenance.setdefault("rescored", []).append({"from": str(run.resolve()), "evaluators": evaluators,
                                                  "at": datetime.now(UTC).isoformat()})
    planned = provenance.get("suite", {}).get("tasks", [])
    trials = int(provenance.get("arguments", {}).get("trials", 1) or 1)
    records = [r for r in ResultLog(out).latest() if r.task_id in planned]
    summary = summarize(records, planned, trials=trials, **suite_marks(provenance.get("suite", {})))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "run.json").write_text(json.dumps(provenance, indent=2) + "\n")
    write_reports(out)
