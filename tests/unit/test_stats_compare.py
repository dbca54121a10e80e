"""Intervals, flaky tasks, and `cu-run compare` on planted result sets."""

import json

import pytest
from runfolders import write_results

from runner.records.compare import compare_runs
from runner.records.results import EpisodeRecord, summarize
from runner.scoring.stats import bootstrap_mean_difference, fisher_exact, is_flaky, wilson


@pytest.mark.parametrize("k, n, expected", [
    (0, 10, (0.0, 0.2775)),
    (5, 10, (0.2366, 0.7634)),
    (10, 10, (0.7225, 1.0)),
    (1, 3, (0.0615, 0.7923)),
])
def test_wilson_interval_matches_published_values(k, n, expected):
    assert wilson(k, n) == pytest.approx(expected, abs=1e-4)
    assert wilson(0, 0) is None


def test_fisher_exact_two_sided():
    assert fisher_exact(3, 3, 0, 3) == pytest.approx(0.1)
    assert fisher_exact(10, 10, 0, 10) == pytest.approx(2 / 184756)
    assert fisher_exact(5, 10, 6, 10) == pytest.approx(1.0)
    assert fisher_exact(1, 8, 6, 8) == pytest.approx(0.0406, abs=1e-4)


def test_flaky_is_a_rate_between_a_fifth_and_four_fifths_over_two_or_more_trials():
    assert [is_flaky(r, 3) for r in (0.0, 1 / 3, 2 / 3, 1.0)] == [False, True, True, False]
    assert not is_flaky(0.5, 1) and not is_flaky(None, 0)


def test_bootstrap_interval_excludes_zero_only_for_a_consistent_change():
    mean, lo, hi = bootstrap_mean_difference([(0.2, 0.8)] * 6 + [(0.5, 0.9)] * 2)
    assert mean > 0.5 and lo > 0
    mean, lo, hi = bootstrap_mean_difference([(0.5, 0.6), (0.6, 0.5), (0.3, 0.3), (0.7, 0.8), (0.4, 0.3)])
    assert lo < 0 < hi


def records(rates: dict[str, tuple[int, int]]) -> list[EpisodeRecord]:
    out = []
    for task, (passes, trials) in rates.items():
        for trial in range(1, trials + 1):
            out.append(EpisodeRecord(task, trial, "pass" if trial <= passes else "fail", "", 1.0, 0, 1,
                                     "2026-11-30T00:00:00", "2026-11-30T00:00:01"))
    return out


def test_summary_lists_flaky_tasks_and_gates_the_stable_ones():
    recs = records({"solid": (3, 3), "wobbly": (1, 3), "broken": (0, 3)})
    recs[0].checkpoints = {"a": True, "b": False}
    summary = summarize(recs, ["solid", "wobbly", "broken"])
    assert summary["overall"]["flaky_tasks"] == ["wobbly"]
    assert summary["overall"]["stable"]["passes"] == 3 and summary["overall"]["stable"]["scored"] == 6
    assert summary["tasks"]["solid"]["checkpoint_progress"] == 0.5
    assert summary["tasks"]["solid"]["wilson95"] == wilson(3, 3)


def test_compare_tells_a_real_change_from_noise(tmp_path):
    base = {"t1": (0, 10), "t2": (5, 10), "t3": (2, 10)}
    better = {"t1": (10, 10), "t2": (6, 10), "t3": (2, 10)}
    a, b = write_results(tmp_path / "a", records(base)), write_results(tmp_path / "b", records(better))
    result = compare_runs(a, b)
    by_task = {row["task"]: row for row in result["tasks"]}
    assert by_task["t1"]["beyond_noise"] and by_task["t1"]["delta"] == 1.0
    assert not by_task["t2"]["beyond_noise"] and by_task["t2"]["delta"] == pytest.approx(0.1)
    assert not by_task["t3"]["beyond_noise"]
    json.dumps(result)  # the --json output is plain JSON


def test_compare_overall_real_and_noise(tmp_path):
    tasks = [f"t{i}" for i in range(8)]
    a = write_results(tmp_path / "a", records({t: (2, 10) for t in tasks}))
    real = write_results(tmp_path / "real", records({t: (8, 10) for t in tasks}))
    noise = write_results(tmp_path / "noise", records({t: (2 + (i % 3) - 1, 10) for i, t in enumerate(tasks)}))
    assert compare_runs(a, real)["overall"]["beyond_noise"]
    assert not compare_runs(a, noise)["overall"]["beyond_noise"]


def test_the_stable_gate_leaves_flaky_tasks_out():
    from runner.runs.run import gate_failure

    summary = summarize(records({"solid": (3, 3), "wobbly": (1, 3), "other": (3, 3)}), ["solid", "wobbly", "other"])
    assert "success rate 0.7778 is under --fail-under 0.9" in gate_failure(summary, 0.9, "all")
    assert gate_failure(summary, 0.9, "stable") is None
    broken = summarize(records({"solid": (0, 3), "wobbly": (1, 3)}), ["solid", "wobbly"])
    assert "flaky left out: wobbly" in gate_failure(broken, 0.5, "stable")


def test_compare_names_what_makes_two_runs_incomparable_and_compares_only_shared_tasks(tmp_path):
    a = write_results(tmp_path / "a", records({"t1": (0, 10), "t2": (5, 10), "only-a": (1, 1)}))
    b = write_results(tmp_path / "b", records({"t1": (10, 10), "t2": (6, 10), "only-b": (1, 1)}))
    for folder, agent, model, suite_hash, image in ((a, "claude", "m-1", "s1", "i1" * 32),
                                                    (b, "codex", None, "s2", "i2" * 32)):
        (folder / "run.json").write_text(json.dumps({
            "agent": {"name": agent, "model": model}, "image": {"name": "linux-test", "sha256": image},
            "suite": {"name": "linux-core", "content_sha256": suite_hash}}))
    result = compare_runs(a, b)
    assert [row["task"] for row in result["tasks"]] == ["t1", "t2"]
    assert result["only_in_a"] == ["only-a"] and result["only_in_b"] == ["only-b"]
    assert result["label_a"] == "claude (m-1)" and result["label_b"] == "codex"
    warnings = "\n".join(result["warnings"])
    assert "suite linux-core changed between the runs" in warnings
    assert "the images differ" in warnings and "the task sets differ: 1 only in A, 1 only in B" in warnings
    assert result["overall"]["a"]["scored"] == 20  # only-a's episode is not in the overall rate


def test_compare_says_when_trials_are_too_few_to_show_anything(tmp_path):
    a = write_results(tmp_path / "a", records({"t1": (0, 2), "t2": (0, 10)}))
    b = write_results(tmp_path / "b", records({"t1": (2, 2), "t2": (10, 10)}))
    by_task = {row["task"]: row for row in compare_runs(a, b)["tasks"]}
    assert "too few trials" in by_task["t1"]["note"] and not by_task["t1"]["beyond_noise"]
    assert "note" not in by_task["t2"] and by_task["t2"]["beyond_noise"]
    assert compare_runs(a, b)["warnings"] == []  # neither has a run.json: nothing to tell apart
