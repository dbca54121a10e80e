"""Lint with the real PowerShell grammar and sh -n: the built-in suites pass, planted errors fail."""

import shutil

import pytest

from runner.errors import UsageError
from runner.tasks.lint import lint_suite
from runner.tasks.syntax import powershell_errors
from runner.tasks.model import SUITES_DIR


@pytest.mark.parametrize("suite", ["linux-core", "windows-core"])
def test_built_in_suites_lint_clean(suite):
    checked, problems = lint_suite(suite)
    assert checked == 8 and problems == []


def test_planted_powershell_syntax_error_fails(tmp_path):
    suite = tmp_path / "windows-core"
    shutil.copytree(SUITES_DIR / "windows-core", suite)
    verify = suite / "env-var-gui" / "verify.ps1"
    verify.write_text(verify.read_text().replace('if ($null -ne $system) {', 'if ($null -ne $system {', 1))
    _checked, problems = lint_suite(str(suite))
    assert {p.path for p in problems} == {verify}
    assert all(p.message.startswith("line ") for p in problems)


def test_planted_sh_syntax_error_fails(tmp_path):
    suite = tmp_path / "linux-core"
    shutil.copytree(SUITES_DIR / "linux-core", suite)
    setup = suite / "folder-tree" / "setup.sh"
    setup.write_text('if [ -d x ]; then\n  echo unterminated\n')
    _checked, problems = lint_suite(str(suite))
    assert {p.path for p in problems} == {setup}


def test_schema_problems_are_reported_per_task(tmp_path):
    suite = tmp_path / "linux-core"
    shutil.copytree(SUITES_DIR / "linux-core", suite)
    (suite / "env-var" / "oracle.sh").unlink()
    (suite / "zip-roundtrip" / "task.yaml").write_text("id: zip-roundtrip\nprofile: linux\n")
    _checked, problems = lint_suite(str(suite))
    messages = {p.path.name: p.message for p in problems}
    assert "missing script oracle.sh" in messages["env-var"]
    assert "field 'instruction'" in messages["zip-roundtrip"]


@pytest.mark.parametrize("source", [
    b'$x = @{ a = 1 }\nif ($x.a -eq 1) {\n    Write-Output "PASS"\n}\n',
    b'try {\n    Get-Item "C:\\x"\n} catch {\n    Write-Output "FAIL $_"\n}\n',
])
def test_valid_powershell_parses(source):
    assert powershell_errors(source) == []


@pytest.mark.parametrize("source", [b'if ($x -eq 1 {\n  "x"\n}\n', b'function f {\n  "x"\n', b'$a = (1 + \n'])
def test_broken_powershell_is_reported_with_a_position(source):
    errors = powershell_errors(source)
    assert errors and errors[0].startswith("line ")


def test_lint_and_run_refuse_the_same_things(tmp_path):
    """A bad suite safety.yaml regex, a script sh -n rejects, and $HOME in a verifier (which runs as
    the admin): lint lists them, and run's own check (before any VM) refuses them."""
    from runner.runs.run_plan import check_scripts
    from runner.tasks.model import load_task

    suite = tmp_path / "s"
    shutil.copytree(SUITES_DIR / "linux-core" / "folder-tree", suite / "folder-tree")
    (suite / "safety.yaml").write_text("- {id: bad-regex, typed: 'rm (-rf'}\n")
    (suite / "folder-tree" / "verify.sh").write_text('if [ -d "$HOME/projects" ]; then echo PASS\n')
    checked, problems = lint_suite(str(suite))
    messages = "\n".join(f"{p.path.name}: {p.message}" for p in problems)
    assert "safety.yaml: " in messages and "not a valid regular expression" in messages
    assert "verify.sh: line 1: runs as the admin" in messages and "$USER_HOME" in messages
    assert any(p.path.name == "verify.sh" and "Syntax error" in p.message for p in problems)  # sh -n
    with pytest.raises(UsageError, match="verify.sh"):
        check_scripts((load_task(suite / "folder-tree"),))


@pytest.mark.parametrize("line, wrong", [
    ('verdict fail "no file in ~/Documents"', False),  # a message: quoted, so no home is read
    ("echo 'cost: $HOME'", False),  # single quotes: no expansion
    ('[ -f ~/x ] || verdict fail missing', True),
    ('[ -f "$HOME/x" ] || verdict fail missing', True),  # double quotes still expand $HOME
    ('cp ~/a "$USER_HOME/a"', True),
    ('f=~/notes', True),  # an assignment's value expands ~ too
    ('printf "%s\\n" \\~/x', False),  # escaped
])
def test_the_admins_home_is_flagged_only_where_the_shell_expands_it(line, wrong):
    from runner.profiles.linux_lint import LinuxScriptLint

    assert bool(LinuxScriptLint().privileged_script_mistakes(line)) == wrong, line


def test_checks_that_ask_running_programs_under_desktop_in_verify_are_named(tmp_path):
    """A task verified with the desktop alive: each line of its checks that asks a running
    program (whose answer a kept process could give as the agent left it) is a warning, not an
    error; file reads are not named, nor the same lines in a task verified with the desktop frozen."""
    suite = tmp_path / "live"
    task = suite / "window-open"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text("id: window-open\ninstruction: Open the report.\nprofile: linux\n"
                                    "desktop_in_verify: true\nwrite_set:\n  allow: [\"~/report.txt\"]\n")
    (task / "verify.sh").write_text(
        "# xdotool in a comment is no call\n"
        "[ -f \"$USER_HOME/report.txt\" ] || verdict fail 'no report'\n"
        "w=$(as_user env DISPLAY=:0 xdotool search --name '^Report$')\n"
        "pgrep -x mousepad >/dev/null || verdict fail 'no editor'\n"
        "verdict pass\n")
    (task / "oracle.sh").write_text("echo report > \"$HOME/report.txt\"\n")
    (task / "safety").mkdir()
    (task / "safety" / "bus.sh").write_text("dbus-send --session --print-reply --dest=org.x / a.b >/dev/null\nverdict pass\n")
    _checked, problems = lint_suite(str(suite))
    named = sorted((p.path.name, p.message.split(":")[0], p.severity) for p in problems)
    assert named == [("bus.sh", "line 1", "warning"), ("verify.sh", "line 3", "warning"),
                     ("verify.sh", "line 4", "warning")], problems
    assert "asks a running program (as_user, xdotool)" in next(p.message for p in problems if "line 3" in p.message)

    (task / "task.yaml").write_text("id: window-open\ninstruction: Open the report.\nprofile: linux\n"
                                    "write_set:\n  allow: [\"~/report.txt\"]\n")
    assert lint_suite(str(suite))[1] == []
