from runner.records.results import EpisodeRecord, ResultLog, summarize


def record(task, trial, outcome):
    return EpisodeRecord(task, trial, outcome, "", 1.0, 0, 1, "t0", "t1")


def test_appended_records_read_back_and_torn_lines_are_skipped(tmp_path):
    log = ResultLog(tmp_path)
    log.append(record("a", 1, "pass"))
    log.append(record("a", 2, "infra_error"))
    with log.path.open("a") as f:
        f.write('{"task_id": "b", "tri')  # a crash mid-write
    assert [(r.task_id, r.trial) for r in log.records()] == [("a", 1), ("a", 2)]
    # infra errors were never scored: resume redoes them
    assert log.finished() == {("a", 1)}
    # the next record after a torn line starts a line of its own and is read back
    log.append(record("b", 1, "fail"))
    assert [(r.task_id, r.trial) for r in log.records()] == [("a", 1), ("a", 2), ("b", 1)]
    assert log.finished() == {("a", 1), ("b", 1)}


def test_latest_line_wins_for_a_redone_episode(tmp_path):
    log = ResultLog(tmp_path)
    log.append(record("a", 1, "infra_error"))
    log.append(record("a", 1, "fail"))
    assert [r.outcome for r in log.latest()] == ["fail"]
    assert log.finished() == {("a", 1)}


def test_summary_leaves_infra_and_verifier_errors_out_of_the_rate_and_lists_task_defects():
    records = [record("a", 1, "pass"), record("a", 2, "fail"), record("a", 3, "infra_error"),
               record("b", 1, "timeout"), record("b", 2, "verifier_error")]
    s = summarize(records, ["a", "b", "c"], not_tamper_proof=("b",))
    assert s["tasks"]["a"]["passes"] == 1 and s["tasks"]["a"]["scored"] == 2 and s["tasks"]["a"]["rate"] == 0.5
    assert s["tasks"]["b"]["rate"] == 0.0 and s["tasks"]["b"]["scored"] == 1 and s["tasks"]["b"]["outcomes"]["timeout"] == 1
    assert s["tasks"]["c"]["rate"] is None
    assert s["overall"]["episodes"] == 5 and s["overall"]["scored"] == 3 and s["overall"]["rate"] == 0.3333
    assert list(s["overall"]["task_defects"]) == ["b"]
    assert s["overall"]["not_tamper_proof_tasks"] == ["b"] and not s["tasks"]["b"]["tamper_proof"]


def test_summary_printed_to_a_log_keeps_task_ids_and_rates_whole(monkeypatch):
    # A run's output often goes to a CI log, not a terminal: the summary must stay readable.
    import io

    from runner.console import make_console
    from runner.runs.run import _print_summary

    monkeypatch.delenv("COLUMNS", raising=False)
    records = [record("editor-write-save", 1, "pass"), record("image-thumbnails-and-index", 1, "fail")]
    out = io.StringIO()
    _print_summary(make_console(file=out), summarize(records, ["editor-write-save", "image-thumbnails-and-index"]))
    lines = out.getvalue().splitlines()
    row = next(line for line in lines if "editor-write-save" in line)
    assert "1.00 [0.21, 1.00]" in row
    assert any("image-thumbnails-and-index" in line for line in lines)
