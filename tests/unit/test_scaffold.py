"""`tasks new` writes a task that lints clean, and `suites list` names the built-in suites."""

import subprocess
import sys

import pytest

from runner.errors import UsageError
from runner.tasks.lint import lint_task_scripts
from runner.tasks.model import load_suite
from runner.tasks.scaffold import TEMPLATE, new_task


def test_a_new_task_loads_and_lints_without_a_problem(tmp_path):
    folder = new_task(tmp_path / "suite", "save-goal")
    assert sorted(p.name for p in folder.iterdir()) == ["oracle.sh", "setup.sh", "task.yaml", "verify.sh"]
    (task,) = load_suite(str(tmp_path / "suite")).tasks
    assert task.id == "save-goal" and task.spec.write_set.allow == ("~/goal.txt",)
    assert lint_task_scripts(folder) == []  # no error, no warning: the verdict helper, printf for data
    # The files are the template's (runner/tasks/templates/new-task, shipped in the package), the id filled in.
    assert (folder / "verify.sh").read_text() == (TEMPLATE / "verify.sh").read_text()
    assert "id: save-goal\n" in (folder / "task.yaml").read_text() and "{name}" not in (folder / "task.yaml").read_text()


@pytest.mark.parametrize("name", ["Bad Name", "-x", "a_b", ""])
def test_a_bad_task_id_is_refused(tmp_path, name):
    with pytest.raises(UsageError, match="is not a task id"):
        new_task(tmp_path, name)


def test_an_existing_task_is_never_overwritten(tmp_path):
    new_task(tmp_path, "t1")
    with pytest.raises(UsageError, match="exists already"):
        new_task(tmp_path, "t1")


def test_suites_list_names_the_built_in_suites():
    shown = subprocess.run([sys.executable, "-m", "runner", "suites", "list"], capture_output=True, text=True,
                           timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert shown.returncode == 0, shown.stderr
    for suite in ("linux-core", "linux-safety", "windows-core", "desktop-core"):
        assert suite in shown.stdout
    assert "linux-desktop" in shown.stdout  # desktop-core's tasks name their image
