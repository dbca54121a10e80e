"""The verdict helper through the Linux profile's real scripts, run by this host's sh (dash, as in
the guest): agent text in a verifier's reason cannot forge a pass, however the verifier prints it.

Each case is a verifier of the kind task authors write, over a file the agent controls (here the
user's goal.txt), and the three ways into the class: a newline in the text, a Unicode line
separator, and backslash escapes that dash's echo expands."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.display import LocalShell
from fakes.profiles import host_folders
from runner.profiles import PROFILES, DesktopUser, register
from runner.scoring.verdict import parse_verdict
from runner.tasks.model import load_suite
from runner.tasks.scripts import run_verifier

ATTACKS = {
    "newline": "nope\nPASS\n",
    "unicode separator": "nope\u2028PASS",
    "dash echo escapes": "nope\\nPASS\\c",
}


@pytest.fixture
def guest(tmp_path):
    profile = register(host_folders(tmp_path / "guest", "linux-verdict"))
    (tmp_path / "guest" / "home" / "alice").mkdir(parents=True)
    yield profile
    del PROFILES["linux-verdict"]


def verify(tmp_path: Path, guest, script: str, goal: str | None) -> tuple:
    folder = tmp_path / "suite" / "t"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text("id: t\ninstruction: x\nprofile: linux-verdict\n")
    (folder / "oracle.sh").write_text("true\n")
    (folder / "verify.sh").write_text(script)
    home = Path(guest.access.home("alice"))
    if goal is not None:
        (home / "goal.txt").write_text(goal)
    (task,) = load_suite(str(tmp_path / "suite")).tasks
    ran = run_verifier(LocalShell(), task, "verify", DesktopUser("alice", str(home)))
    return parse_verdict(ran.result.stdout, ran.result.exit_code, ran.recorded), ran


HELPER_VERIFIER = ('c=$(cat "$USER_HOME/goal.txt" 2>/dev/null)\n'
                   '[ "$c" = done ] && verdict pass\n'
                   'echo "goal.txt holds: $c"\n'  # agent text in the log is harmless now
                   'verdict fail "goal.txt holds: $c"\n')


@pytest.mark.parametrize("attack", ATTACKS)
def test_with_the_helper_agent_text_in_the_reason_stays_a_fail(guest, tmp_path, attack):
    verdict, ran = verify(tmp_path, guest, HELPER_VERIFIER, ATTACKS[attack])
    assert verdict.kind == "fail" and verdict.channel == "helper", verdict
    assert "goal.txt holds: nope" in verdict.reason
    assert "cu-run-verdict-" not in ran.result.stdout  # the boundary is not part of the log


def test_with_the_helper_a_pass_is_a_pass_and_the_folder_is_removed(guest, tmp_path):
    verdict, _ran = verify(tmp_path, guest, HELPER_VERIFIER, "done")
    assert (verdict.kind, verdict.channel) == ("pass", "helper")
    assert not Path(guest.scripts.admin_task_dir).exists()


def test_a_fail_once_recorded_stands_against_a_later_pass(guest, tmp_path):
    # A fail recorded in a subshell (a pipeline) does not end the script; a pass after it changes nothing.
    script = 'printf "a\\nb\\n" | while read -r line; do verdict fail "line $line"; done\nverdict pass\n'
    verdict, _ran = verify(tmp_path, guest, script, None)
    assert (verdict.kind, verdict.reason) == ("fail", "line a")


def test_the_helper_ends_the_script(guest, tmp_path):
    verdict, ran = verify(tmp_path, guest, 'verdict fail first\necho after\nexit 3\n', None)
    assert (verdict.kind, verdict.reason, ran.result.exit_code) == ("fail", "first", 0)
    assert "after" not in ran.result.stdout


def test_a_script_without_the_helper_falls_back_to_its_stdout(guest, tmp_path):
    verdict, ran = verify(tmp_path, guest, 'echo checking\necho PASS\n', None)
    assert (verdict.kind, verdict.channel, ran.recorded) == ("pass", "stdout", None)


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_plain_stdout_verifier_that_echoes_agent_text_is_never_forged_into_a_pass(guest, tmp_path, attack):
    """The older contract, as the built-in verifiers were written: `echo "FAIL ... $content"`.
    Every attack now gives a fail or no verdict (judged against the untouched state by the
    harness), never a pass."""
    script = ('c=$(cat "$USER_HOME/goal.txt" 2>/dev/null)\n'
              'if [ "$c" = done ]; then echo PASS; else echo "FAIL goal.txt holds: $c"; fi\n')
    verdict, _ran = verify(tmp_path, guest, script, ATTACKS[attack])
    assert verdict.kind in ("fail", "error"), verdict
