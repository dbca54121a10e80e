"""`cu-run export inspect RUN_DIR`: a run as an Inspect eval log (`inspect view` opens it).

Each episode is one sample: the task's instruction is the input; the scores are the outcome,
pass or not, and checkpoint progress; the metadata holds the host, the image's sha256, the
phases, violations, the write set and the verifier's output; the events are the trajectory's
tool calls, screenshots included as images. The eval's metadata is run.json's provenance.
inspect_ai is an optional extra (pip install 'cu-run[inspect]').
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.errors import UsageError
from runner.records.folders import is_run_folder, not_a_run_folder
from runner.records.report import planned_trials, read_json, task_instructions
from runner.records.results import RESULTS, EpisodeRecord, ResultLog, summarize

MAX_LOG_CHARS = 20_000  # of a verifier's output kept in a sample's metadata


def export_inspect(run_dir: Path, out: Path | None = None) -> Path:
    """Writes RUN_DIR as an Inspect eval log to OUT (default RUN_DIR/inspect.eval); returns its path."""
    try:
        from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalScore, EvalSpec
        from inspect_ai.log import EvalStats
        from inspect_ai.log import write_eval_log
    except ImportError:
        raise UsageError("exporting to Inspect needs inspect_ai",
                         fix="pip install 'cu-run[inspect]' (or: scripts/setup-host.sh --extras inspect)") from None
    if not (run_dir / RESULTS).is_file():
        if not is_run_folder(run_dir):
            raise not_a_run_folder(run_dir)
        raise UsageError(f"{run_dir} is a run folder where no episode has finished yet: nothing to export",
                         fix="finish the run first (the same command with --resume)")
    run = read_json(run_dir / "run.json")
    records = ResultLog(run_dir).latest()
    instructions = task_instructions(run)
    suite = run.get("suite", {})
    summary = summarize(records, suite.get("tasks") or sorted({r.task_id for r in records}), trials=planned_trials(run))
    overall = summary["overall"]
    missing_episodes = summary.get("completeness", {}).get("missing", [])
    created = run.get("started_at") or datetime.now(UTC).isoformat()
    samples = [_sample(run_dir, r, instructions.get(r.task_id, r.task_id), run) for r in records]
    log = EvalLog(
        # Inspect shows a log's duration from these: without them it reads "NaN days".
        stats=EvalStats(started_at=created, completed_at=run.get("ended_at") or ""),
        # A run that ended with planned episodes missing was stopped: Inspect calls that cancelled.
        status=("cancelled" if missing_episodes else "success") if run.get("ended_at") else "started",
        eval=EvalSpec(created=created, task=f"cu-run/{suite.get('name', run_dir.name)}",
                      model=f"agent/{run.get('agent', {}).get('name', 'unknown')}",
                      dataset=EvalDataset(name=suite.get("name"), location=suite.get("path"), samples=len(samples)),
                      config=EvalConfig(epochs=max((r.trial for r in records), default=1)),
                      metadata={"cu_run": run}),
        # No score where nothing was scored: an accuracy of 0.0 would read as an agent that failed everything.
        results=EvalResults(total_samples=len(samples) + len(missing_episodes), completed_samples=len(samples), scores=[
            EvalScore(name="passed", scorer="cu-run", scored_samples=overall["scored"],
                      unscored_samples=overall["episodes"] - overall["scored"],
                      metrics={"accuracy": EvalMetric(name="accuracy", value=overall["rate"])})]
            if overall["scored"] else []),
        samples=samples,
        metadata={"summary": summary},
    )
    target = out or run_dir / "inspect.eval"
    write_eval_log(log, str(target))
    return target


def _sample(run_dir: Path, record: EpisodeRecord, instruction: str, run: dict):
    from inspect_ai.log import EvalSample
    from inspect_ai.scorer import Score

    episode = run_dir / record.task_id / str(record.trial)
    scored = record.outcome not in ("infra_error", "verifier_error")
    progress = (sum(record.checkpoints.values()) / len(record.checkpoints)) if record.checkpoints else None
    scores = {"outcome": Score(value=record.outcome, explanation=record.reason or None)}
    if scored:
        scores["passed"] = Score(value=1.0 if record.outcome == "pass" else 0.0)
    if progress is not None:
        scores["checkpoints"] = Score(value=progress)
    return EvalSample(
        # One id per task, its trials as Inspect's epochs: Inspect's reducers and epoch views then work.
        id=record.task_id, epoch=record.trial, input=instruction, target="",
        scores=scores, events=_screenshot_event(episode, "initial", record.started_at) + _tool_events(episode)
        + _screenshot_event(episode, "final", record.ended_at),
        metadata={"task_id": record.task_id, "trial": record.trial, "outcome": record.outcome,
                  "reason": record.reason, "host": run.get("host"), "image_sha256": run.get("image", {}).get("sha256"),
                  "phases": record.phases, "violations": record.violations, "write_set": record.changed,
                  "check_errors": record.check_errors, "intervened": record.intervened,
                  "verifier_output": _text(episode / "verify.log")},
        started_at=record.started_at or None, completed_at=record.ended_at or None,
        total_time=record.duration_s,
    )


def _screenshot_event(episode: Path, which: str, when: str) -> list:
    """The runner's own capture of the screen before the agent (initial) or after it (final), as an
    event with the picture: every agent's sample has them, the oracle's and nop's included."""
    from inspect_ai.event import ToolEvent
    from inspect_ai.model import ContentImage

    shot = episode / f"{which}.png"
    if not shot.is_file():
        return []
    image = ContentImage(image="data:image/png;base64," + base64.b64encode(shot.read_bytes()).decode())
    when_taken: dict[str, Any] = {"timestamp": when} if when else {}  # Inspect parses the ISO time
    return [ToolEvent(id=f"{which}-screenshot", function=f"cu_run_{which}_screenshot", arguments={}, result=[image],
                      **when_taken)]


def _tool_events(episode: Path) -> list:
    from inspect_ai.event import ToolEvent
    from inspect_ai.model import ContentImage, ContentText

    events: list = []
    path = episode / "trajectory.jsonl"
    if not path.is_file():
        return events
    for number, line in enumerate(path.read_text().splitlines(), 1):
        try:
            step = json.loads(line)
        except ValueError:
            continue  # a line torn by a kill mid-write
        result: list = [ContentText(text=str(step.get("result", "")))]
        shot = episode / step["screenshot"] if step.get("screenshot") else None
        if shot is not None and shot.is_file():
            result.append(ContentImage(image="data:image/png;base64," + base64.b64encode(shot.read_bytes()).decode()))
        # A person's input (live view) has no step of its own: its line number keeps its id unique.
        ident = f"human-{number}" if step.get("intervention") else f"step-{step.get('step')}"
        events.append(ToolEvent(id=ident, function=str(step.get("tool", step.get("action"))),
                                arguments=step.get("arguments") or {}, result=result, timestamp=step.get("time"),
                                working_time=step.get("duration_s")))
    return events


def _text(path: Path) -> str | None:
    if not path.is_file():
        return None
    text = path.read_text(errors="replace")
    return text if len(text) <= MAX_LOG_CHARS else text[:MAX_LOG_CHARS] + "\n[cut]"
