"""`tasks select` with the real nop baseline on VMs: a task the baseline passes is left out and
named, the same seed gives the same file twice, and a run refuses a selection once the suite
changed."""

import shutil

import pytest
import yaml
from vmtools import cu_run

from runner.tasks.model import SUITES_DIR

REAL = ("env-var", "folder-tree")


def _suite_with_a_planted_task(folder):
    for task in REAL:
        shutil.copytree(SUITES_DIR / "linux-core" / task, folder / task)
    planted = folder / "planted-passes"
    shutil.copytree(SUITES_DIR / "linux-core" / "env-var", planted)
    (planted / "task.yaml").write_text((planted / "task.yaml").read_text().replace("id: env-var", "id: planted-passes"))
    (planted / "verify.sh").write_text("echo PASS\n")  # doing nothing passes it: not a task for a study
    return folder


@pytest.mark.full  # the selection: tests/unit/test_selection.py; nop episodes: every default-tier validate
def test_select_with_a_nop_baseline_is_reproducible_and_binds_the_suite(linux_image, tmp_path):
    suite = _suite_with_a_planted_task(tmp_path / "suite")
    files = []
    for draw in ("first", "second"):
        (tmp_path / draw).mkdir()
        out = tmp_path / draw / "selection.yaml"
        result = cu_run("tasks", "select", "--suite", str(suite), "--seed", "4", "--count", "3", "--vm-pool", "2",
                        "--out", str(out))
        assert result.returncode == 0, result.stdout + result.stderr[-3000:]
        files.append(out.read_text())
    assert files[0] == files[1]
    selection = yaml.safe_load(files[0])
    assert sorted(selection["tasks"]) == sorted(REAL)
    assert selection["skipped"] == [{"id": "planted-passes",
                                     "reason": "the baseline passed it: the task is solved by doing nothing"}]
    assert selection["baseline_run"] == "selection.baseline"
    assert (tmp_path / "first" / "selection.baseline" / "results.jsonl").exists()

    (suite / "folder-tree" / "verify.sh").write_text("echo PASS\n")
    refused = cu_run("run", "--suite", str(suite), "--agent", "nop", "--selection",
                     str(tmp_path / "first" / "selection.yaml"), "--out", str(tmp_path / "run"))
    assert refused.returncode == 1 and "changed: folder-tree" in refused.stderr, refused.stderr[-2000:]
    assert not (tmp_path / "run").exists()
