"""Drawing a study's tasks by the published rule, with a fake baseline at the seam (the
baseline's verdicts); tests/e2e/test_selection.py runs the real nop baseline on VMs."""

import random
import shutil

import pytest
import yaml

from runner.config import Settings
from runner.errors import UsageError
from runner.runs.request import RunRequest
from runner.runs.run_plan import plan_run
from runner.tasks.model import SUITES_DIR, load_suite
from runner.tasks.selection import Exclusions, draw, load_selection, walk_order


class FakeBaseline:
    """Says FAIL (a clean zero) for every task but those given another outcome; counts its calls."""

    def __init__(self, outcomes=None):
        self.outcomes = outcomes or {}
        self.asked: list[list[str]] = []

    def __call__(self, task_ids):
        self.asked.append(list(task_ids))
        return {t: self.outcomes.get(t, ("fail", "nothing done")) for t in task_ids}


def test_the_walk_order_is_the_sorted_ids_shuffled_by_the_seed():
    ids = ["c", "a", "b", "e", "d"]
    expected = sorted(ids)
    random.Random(7).shuffle(expected)
    assert walk_order(ids, 7) == expected
    assert walk_order(list(reversed(ids)), 7) == expected  # the pool's order does not matter


def test_the_same_inputs_give_the_same_file():
    suite = load_suite("linux-core")
    first = draw(suite, 11, 4, Exclusions(), FakeBaseline(), batch=2, baseline_name="nop").as_yaml()
    second = draw(suite, 11, 4, Exclusions(), FakeBaseline(), batch=2, baseline_name="nop").as_yaml()
    assert first == second
    other = draw(suite, 12, 4, Exclusions(), FakeBaseline(), batch=2, baseline_name="nop")
    assert other.tasks != yaml.safe_load(first)["tasks"]
    data = yaml.safe_load(first)
    assert set(data) >= {"rule", "seed", "suite_hash", "tasks", "skipped", "baseline_run"}
    assert data["tasks"] == walk_order([t.id for t in suite.tasks], 11)[:4]


def test_a_task_the_baseline_passes_or_cannot_finish_is_skipped_with_its_reason_and_the_walk_stops_at_count():
    suite = load_suite("linux-core")
    order = walk_order([t.id for t in suite.tasks], 3)
    baseline = FakeBaseline({order[0]: ("pass", ""), order[1]: ("verifier_error", "no verdict"),
                             order[2]: ("infra_error", "setup exited 1")})
    selection = draw(suite, 3, 2, Exclusions(), baseline, batch=1, baseline_name="nop")
    assert selection.tasks == order[3:5]
    reasons = {s["id"]: s["reason"] for s in selection.skipped}
    assert "solved by doing nothing" in reasons[order[0]]
    assert "verification did not complete" in reasons[order[1]] and "no verdict" in reasons[order[1]]
    assert "setup did not complete" in reasons[order[2]]
    assert order[5] not in reasons  # never reached: the walk stopped at 2
    assert sum(len(a) for a in baseline.asked) <= 6


def test_excluded_ids_and_tags_never_enter_the_walk():
    suite = load_suite("linux-core")
    terminal = {t.id for t in suite.tasks if "terminal" in t.spec.tags}
    selection = draw(suite, 5, 8, Exclusions(ids=("folder-tree",), tags=("terminal",)), None)
    assert "folder-tree" not in selection.tasks and not terminal & set(selection.tasks)
    assert selection.baseline is None and selection.skipped == []
    with pytest.raises(UsageError, match="does not have: no-such-task"):
        draw(suite, 5, 1, Exclusions(ids=("no-such-task",)), None)


def test_a_selection_is_refused_naming_what_changed_since_the_draw(tmp_path):
    folder = tmp_path / "suite"
    shutil.copytree(SUITES_DIR / "linux-core", folder)
    suite = load_suite(str(folder))
    path = tmp_path / "selection.yaml"
    path.write_text(draw(suite, 1, 3, Exclusions(), None).as_yaml())
    assert load_selection(path, suite) == walk_order([t.id for t in suite.tasks], 1)[:3]

    (folder / "env-var" / "verify.sh").write_text("echo PASS\n")
    shutil.rmtree(folder / "zip-roundtrip")
    with pytest.raises(UsageError) as info:
        load_selection(path, load_suite(str(folder)))
    assert "changed: env-var" in info.value.message and "removed: zip-roundtrip" in info.value.message

    settings = Settings.resolve(tmp_path / "cache")
    with pytest.raises(UsageError, match="changed since the selection"):
        plan_run(settings, RunRequest.of(str(folder), "nop", selection=path))
    with pytest.raises(UsageError, match="--tasks and --selection"):
        plan_run(settings, RunRequest.of(str(folder), "nop", selection=path, tasks=("env-var",)))


def test_a_file_that_is_not_a_selection_is_refused(tmp_path):
    path = tmp_path / "selection.yaml"
    path.write_text("just: text\n")
    with pytest.raises(UsageError, match="is not a selection"):
        load_selection(path, load_suite("linux-core"))
