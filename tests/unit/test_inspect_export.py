"""A run exported as an Inspect eval log, read back with inspect_ai's own reader."""

import json

import pytest
from PIL import Image
from runfolders import write_results

from runner.records.inspect_export import export_inspect
from runner.records.results import EpisodeRecord, ResultLog
from runner.tasks.model import SUITES_DIR

inspect_log = pytest.importorskip("inspect_ai.log")


def planted(tmp_path):
    run = tmp_path / "run"
    records = [
        EpisodeRecord("folder-tree", 1, "pass", "", 30.0, 0, 1, "2026-12-01T10:00:00+00:00",
                      "2026-12-01T10:00:30+00:00", {"restore": 0.8, "agent": 20.0}),
        EpisodeRecord("folder-tree", 2, "fail", "changed outside the allowed paths: /home/cu/x (created)", 31.0, 1, 1,
                      "2026-12-01T10:00:00+00:00", "2026-12-01T10:00:31+00:00", {}, checkpoints={"a": True, "b": False},
                      violations=[{"rule": "no-rm", "step": 2, "detail": "typed 'rm -rf ~'"}], changed=["/home/cu/x (created)"]),
        EpisodeRecord("calc-to-file", 1, "verifier_error", "no verdict", 5.0, 0, 1, "2026-12-01T10:01:00+00:00",
                      "2026-12-01T10:01:05+00:00", {}),
    ]
    write_results(run, records)
    (run / "run.json").write_text(json.dumps({
        "started_at": "2026-12-01T10:00:00+00:00", "ended_at": "2026-12-01T10:02:00+00:00",
        "suite": {"name": "linux-core", "path": str(SUITES_DIR / "linux-core"), "tasks": ["folder-tree", "calc-to-file"]},
        "agent": {"name": "scripted"}, "host": {"cores": 2}, "image": {"sha256": "ab" * 32}}))
    episode = run / "folder-tree" / "1"
    episode.mkdir(parents=True)
    Image.new("RGB", (64, 40), (0, 200, 0)).save(episode / "step-0001.png")
    for name in ("initial", "final"):  # the runner's own captures, before and after the agent
        Image.new("RGB", (64, 40), (0, 0, 200)).save(episode / f"{name}.png")
    (episode / "trajectory.jsonl").write_text(
        json.dumps({"step": 1, "time": "2026-12-01T10:00:05+00:00", "tool": "computer_use_screenshot",
                    "action": "screenshot", "arguments": {}, "result": "PNG", "screenshot": "step-0001.png",
                    "duration_s": 0.04}) + "\n"
        + json.dumps({"step": 2, "time": "2026-12-01T10:00:06+00:00", "tool": "computer_use_keyboard_type",
                      "action": "type", "arguments": {"text": "mkdir -p ~/projects"}, "result": "ok",
                      "duration_s": 0.01}) + "\n")
    (episode / "verify.log").write_text("exit 0\n--- stdout\nPASS\n")
    return run


def test_every_episode_is_a_sample_that_reads_back(tmp_path):
    run = planted(tmp_path)
    path = export_inspect(run)
    log = inspect_log.read_eval_log(str(path))
    records = {(r.task_id, r.trial): r for r in ResultLog(run).latest()}
    assert log.status == "success" and len(log.samples) == len(records) == 3
    assert log.eval.metadata["cu_run"]["image"]["sha256"] == "ab" * 32
    for sample in log.samples:
        record = records[(sample.metadata["task_id"], sample.epoch)]
        assert sample.scores["outcome"].value == record.outcome
        assert sample.metadata["phases"] == record.phases and sample.metadata["write_set"] == record.changed
        assert "passed" in sample.scores if record.outcome != "verifier_error" else "passed" not in sample.scores
    by_id = {(s.id, s.epoch): s for s in log.samples}  # one id per task, its trials as epochs
    assert set(by_id) == {("folder-tree", 1), ("folder-tree", 2), ("calc-to-file", 1)}
    assert log.stats.started_at == "2026-12-01T10:00:00+00:00" and log.stats.completed_at == "2026-12-01T10:02:00+00:00"
    passed = by_id[("folder-tree", 1)]
    assert passed.input.startswith("In your home folder") and passed.scores["passed"].value == 1.0
    assert "PASS" in passed.metadata["verifier_output"]
    assert [e.function for e in passed.events] == ["cu_run_initial_screenshot", "computer_use_screenshot",
                                                   "computer_use_keyboard_type", "cu_run_final_screenshot"]
    image = passed.events[1].result[1].image  # Inspect keeps images as the sample's attachments
    assert (passed.attachments.get(image.removeprefix("attachment://"), image)).startswith("data:image/png;base64,")
    assert by_id[("folder-tree", 2)].scores["checkpoints"].value == 0.5
    assert log.results.scores[0].metrics["accuracy"].value == 0.5  # 1 pass of 2 scored


def test_a_folder_without_results_is_one_clear_message(tmp_path):
    from runner.errors import UsageError

    with pytest.raises(UsageError, match="is not a run folder"):  # not a run at all: said so, with what to pass
        export_inspect(tmp_path)
    (tmp_path / "run.json").write_text("{}")  # a run stopped before its first episode ended
    with pytest.raises(UsageError, match="no episode has finished yet"):
        export_inspect(tmp_path)


def test_a_run_with_planned_episodes_missing_exports_as_cancelled_and_says_so(tmp_path):
    """Stopped after 3 of its 4 planned episodes: Inspect's status is never success, and the
    report and summary name the missing one."""
    from runner.records.report import write_reports

    run = planted(tmp_path)
    provenance = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**provenance, "arguments": {"trials": 2}}))
    log = inspect_log.read_eval_log(str(export_inspect(run)))
    assert log.status == "cancelled"
    assert log.results.total_samples == 4 and log.results.completed_samples == 3
    from runner.records.report import _summary, read_json

    summary = _summary(read_json(run / "run.json"), ResultLog(run).latest())["completeness"]
    assert summary == {"planned": 4, "done": 3, "missing": ["calc-to-file #2"]}
    html_path, _junit = write_reports(run)
    assert "Incomplete:</b> 3 of 4 planned episodes have a result; missing: calc-to-file #2" in html_path.read_text()


def test_nothing_scored_gives_no_accuracy(tmp_path):
    run = tmp_path / "run"
    write_results(run, [EpisodeRecord("calc-to-file", 1, "verifier_error", "no verdict", 5.0, 0, 1,
                                      "2026-12-01T10:01:00+00:00", "2026-12-01T10:01:05+00:00", {})])
    (run / "run.json").write_text(json.dumps({
        "started_at": "2026-12-01T10:00:00+00:00", "ended_at": "2026-12-01T10:02:00+00:00",
        "suite": {"name": "linux-core", "path": str(SUITES_DIR / "linux-core"), "tasks": ["calc-to-file"]},
        "agent": {"name": "nop"}, "arguments": {"trials": 1}}))
    log = inspect_log.read_eval_log(str(export_inspect(run)))
    assert log.status == "success" and log.results.scores == []
