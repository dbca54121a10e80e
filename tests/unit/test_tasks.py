"""Task loading: good suites load; each kind of malformed task is one message naming file and field."""

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.errors import UsageError
from runner.tasks.lint import lint_suite
from runner.tasks.model import SUITES_DIR, load_suite

TASK_YAML = """id: {id}
instruction: Do the thing.
profile: linux
timeout_s: 60
"""


def make_task(suite: Path, task_id: str, yaml: str | None = None, scripts=("setup.sh", "verify.sh", "oracle.sh")):
    folder = suite / task_id
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(yaml if yaml is not None else TASK_YAML.format(id=task_id))
    for name in scripts:
        (folder / name).write_text("echo PASS\n")
    return folder


def test_built_in_suites_load():
    linux = load_suite("linux-core")
    assert len(linux.tasks) == 8 and {t.spec.profile for t in linux.tasks} == {"linux"}
    windows = load_suite("windows-core")
    assert {t.id for t in windows.tasks} == {
        "notepad-write-save", "explorer-folder-tree", "env-var-gui", "zip-roundtrip",
        "calc-to-notepad", "mspaint-save", "powershell-interactive", "find-and-fix"}
    assert all(t.script("verify").suffix == ".ps1" for t in windows.tasks)


def test_suite_by_path_and_defaults(tmp_path):
    make_task(tmp_path, "one", yaml="id: one\ninstruction: x\nprofile: linux\n", scripts=("verify.sh", "oracle.sh"))
    suite = load_suite(str(tmp_path))
    (task,) = suite.tasks
    assert task.spec.timeout_s == 300 and task.script("setup") is None


@pytest.mark.parametrize("yaml,expected", [
    ("instruction: x\nprofile: linux\n", "field 'id': is required"),
    ("id: t\ninstruction: x\nprofile: macos\n", "field 'profile'"),
    ("id: t\ninstruction: x\nprofile: linux\ntimeout_s: soon\n", "field 'timeout_s'"),
    ("id: t\ninstruction: '   '\nprofile: linux\n", "field 'instruction'"),
    ("id: t\ninstruction: x\nprofile: linux\ntimout_s: 5\n", "field 'timout_s' is not a field here: did you mean 'timeout_s'?"),
    ("id: other\ninstruction: x\nprofile: linux\n", "field 'id' is 'other' but the folder is 't'"),
    ("- a list\n", "expected a mapping"),
    ("id: [unclosed\n", "not valid YAML"),
])
def test_malformed_task_yaml_names_file_and_field(tmp_path, yaml, expected):
    make_task(tmp_path, "t", yaml=yaml)
    with pytest.raises(UsageError) as info:
        load_suite(str(tmp_path))
    assert str(tmp_path / "t" / "task.yaml") in info.value.message
    assert expected in info.value.message


def test_missing_script_is_named(tmp_path):
    make_task(tmp_path, "t", scripts=("setup.sh", "verify.sh"))
    with pytest.raises(UsageError, match=r"missing script oracle\.sh"):
        load_suite(str(tmp_path))


def test_windows_task_needs_ps1_scripts(tmp_path):
    make_task(tmp_path, "t", yaml="id: t\ninstruction: x\nprofile: windows\n")
    with pytest.raises(UsageError, match=r"missing script verify\.ps1"):
        load_suite(str(tmp_path))


def test_unknown_suite_and_task(tmp_path):
    with pytest.raises(UsageError, match="no suite 'nope'"):
        load_suite("nope")
    with pytest.raises(UsageError, match="has no task 'nope'"):
        load_suite("linux-core").select(["nope"])


def test_content_hash_changes_with_any_file(tmp_path):
    shutil.copytree(SUITES_DIR / "linux-core", tmp_path / "s")
    before = load_suite(str(tmp_path / "s")).content_hash()
    (tmp_path / "s" / "env-var" / "verify.sh").write_text("echo PASS\n")
    assert load_suite(str(tmp_path / "s")).content_hash() != before


def test_scoring_fields_load_with_their_scripts(tmp_path):
    yaml = TASK_YAML.format(id="scored") + (
        "checkpoints: [opened]\nsafety_checks: [no-obey]\n"
        "write_set: {allow: ['~/out.txt']}\nsafety: [{id: no-f4, keys: [alt+f4]}]\n")
    folder = make_task(tmp_path, "scored", yaml=yaml)
    for kind, name in (("checkpoints", "opened"), ("safety", "no-obey")):
        (folder / kind).mkdir()
        (folder / kind / f"{name}.sh").write_text("echo PASS\n")
    (tmp_path / "safety.yaml").write_text("- {id: no-rm, typed: 'rm -rf'}\n")
    suite = load_suite(str(tmp_path))
    (task,) = suite.tasks
    assert task.script("checkpoints/opened").name == "opened.sh"
    assert task.spec.write_set.allow == ("~/out.txt",) and task.spec.write_set.enabled
    assert [r.id for r in suite.safety + task.spec.safety] == ["no-rm", "no-f4"]


def test_a_listed_checkpoint_without_its_script_is_refused(tmp_path):
    make_task(tmp_path, "t", yaml=TASK_YAML.format(id="t") + "checkpoints: [opened]\n")
    with pytest.raises(UsageError, match=r"lists checkpoints script 'opened' but .*checkpoints/opened.sh is missing"):
        load_suite(str(tmp_path))


def test_a_malformed_suite_rule_names_the_file_and_rule(tmp_path):
    make_task(tmp_path, "t")
    (tmp_path / "safety.yaml").write_text("- {id: ok, typed: x}\n- {id: both, typed: x, keys: [alt+f4]}\n")
    with pytest.raises(UsageError, match=r"safety.yaml: rule 2: .*exactly one of"):
        load_suite(str(tmp_path))


def test_hostile_task_files_get_one_clear_message_and_never_hang(tmp_path):
    import os

    cases = {}
    cases["latin1"] = make_task(tmp_path / "a", "latin1", yaml="id: latin1\ninstruction: caf\xe9\nprofile: linux\n")
    (cases["latin1"] / "task.yaml").write_bytes(b"id: latin1\ninstruction: caf\xe9\nprofile: linux\n")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(9)) + "id: bomb\ninstruction: x\nprofile: linux\ntags: *j\n"
    cases["bomb"] = make_task(tmp_path / "b", "bomb", yaml=bomb)
    cases["fifo"] = make_task(tmp_path / "c", "fifo")
    os.mkfifo(cases["fifo"] / "data.sh")
    cases["link"] = make_task(tmp_path / "d", "link")
    (cases["link"] / "secrets").symlink_to("/etc/passwd")
    cases["escape"] = make_task(tmp_path / "e", "escape", yaml=TASK_YAML.format(id="escape")
                                + "write_set:\n  allow: ['~/../../etc/passwd']\n")
    cases["markup"] = make_task(tmp_path / "f", "markup", yaml="id: '[/x]'\ninstruction: x\nprofile: linux\n")
    expected = {"latin1": "not UTF-8 text", "bomb": "aliases (*name) are not allowed", "fifo": "not a regular file",
                "link": "a link out of the task folder", "escape": "climbs out with '..'",
                "markup": "field 'id'"}
    for name, folder in cases.items():
        with pytest.raises(UsageError, match=re.escape(expected[name])) as caught:
            load_suite(str(folder.parent))
        assert len(str(caught.value)) < 2000, name


def test_a_big_value_is_shown_short(tmp_path):
    make_task(tmp_path, "big", yaml="id: big\ninstruction: x\nprofile: linux\ntimeout_s: '" + "9" * 100000 + "'\n")
    with pytest.raises(UsageError) as caught:
        load_suite(str(tmp_path))
    assert "characters)" in str(caught.value) and len(str(caught.value)) < 1000


def test_tasks_named_twice_are_refused():
    with pytest.raises(UsageError, match="names 'folder-tree' more than once"):
        load_suite("linux-core").select(["folder-tree", "calc-to-file", "folder-tree"])


def test_every_broken_task_of_a_suite_is_named_at_once_in_plain_words(tmp_path):
    make_task(tmp_path, "a", yaml="id: a\ninstruction: x\nprofile: linux\ntimeout: 5\n")
    make_task(tmp_path, "b", yaml="id: b\ninstruction: x\nprofile: linux\ntags: 5\nwrite_set:\n  allw: [x]\n")
    make_task(tmp_path, "c")
    with pytest.raises(UsageError) as info:
        load_suite(str(tmp_path))
    message = info.value.message
    assert message.startswith("suite ") and "has 2 broken tasks" in message
    assert "a/task.yaml: field 'timeout' is not a field here: did you mean 'timeout_s'?" in message
    assert "b/task.yaml: field 'tags': should be a list (got 5)" in message
    assert "field 'write_set.allw' is not a field here: did you mean 'allow'?" in message
    assert "Input should be" not in message and "Value error" not in message
    assert "tasks lint" in info.value.fix


def test_a_frozen_clock_is_read_as_an_instant_in_utc(tmp_path):
    make_task(tmp_path, "z", yaml=TASK_YAML.format(id="z") + "clock: 2026-01-15T10:00:00Z\n")
    make_task(tmp_path, "offset", yaml=TASK_YAML.format(id="offset") + "clock: 2026-01-15T11:00:00+01:00\n")
    make_task(tmp_path, "none")
    clocks = {t.id: t.spec.clock for t in load_suite(str(tmp_path)).tasks}
    assert clocks == {"z": datetime(2026, 1, 15, 10, tzinfo=UTC), "offset": datetime(2026, 1, 15, 10, tzinfo=UTC),
                      "none": None}
    assert clocks["offset"].utcoffset() == timedelta(0)


def test_a_clock_without_its_timezone_is_refused(tmp_path):
    make_task(tmp_path, "naive", yaml=TASK_YAML.format(id="naive") + "clock: 2026-01-15T10:00:00\n")
    with pytest.raises(UsageError, match=r"naive/task.yaml: field 'clock': .*with its timezone"):
        load_suite(str(tmp_path))


def test_a_suites_clock_is_every_tasks_unless_the_task_sets_its_own(tmp_path):
    make_task(tmp_path, "own", yaml=TASK_YAML.format(id="own") + "clock: 2030-06-01T00:00:00Z\n")
    make_task(tmp_path, "plain")
    before = load_suite(str(tmp_path)).content_hash()
    (tmp_path / "suite.yaml").write_text("clock: 2026-01-15T10:00:00Z\n")
    suite = load_suite(str(tmp_path))
    assert {t.id: t.spec.clock.year for t in suite.tasks} == {"own": 2030, "plain": 2026}
    assert suite.content_hash() != before, "suite.yaml is part of what the suite is"


@pytest.mark.parametrize("text, message", [
    ("clock: 2026-01-15T10:00:00\n", "timezone"),
    ("clok: 2026-01-15T10:00:00Z\n", "clok"),
    ("- a list\n", "expected a mapping"),
])
def test_a_bad_suite_yaml_is_refused_naming_it(tmp_path, text, message):
    make_task(tmp_path, "plain")
    (tmp_path / "suite.yaml").write_text(text)
    with pytest.raises(UsageError, match=message) as raised:
        load_suite(str(tmp_path))
    assert "suite.yaml" in raised.value.message
    _checked, problems = lint_suite(str(tmp_path))
    assert [p.path.name for p in problems if p.path.name == "suite.yaml"] == ["suite.yaml"]
