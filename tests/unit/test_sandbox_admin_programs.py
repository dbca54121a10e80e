"""The Inspect sandbox's commands through the admin channel (runner.sandbox.episode): its marker
for the computer tool and a sample's own command as root or another account, guest programs run
here with sh (LocalShell) through a stand-in VM that is only its display and admin shell."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fakes.display import FakeDisplay, LocalShell
from runner.sandbox.episode import SandboxEpisode


@pytest.fixture
def episode(tmp_path):
    vm = SimpleNamespace(display=FakeDisplay(64, 48), admin_shell=LocalShell())
    return SandboxEpisode(vm, tmp_path / "ep", None)  # type: ignore[arg-type]


def test_a_samples_command_gets_its_folder_environment_and_input(episode, tmp_path):
    (tmp_path / "work dir").mkdir()
    ran = episode._as_account(["sh", "-c", 'printf "%s|%s|%s|" "$A" "$B" "$(pwd)"; cat'], b"in'put\n$x",
                              str(tmp_path / "work dir"), {"A": "one two", "B": "$(touch /tmp/never)"}, "root", 30)
    assert (ran.returncode, ran.stdout) == (0, f"one two|$(touch /tmp/never)|{tmp_path / 'work dir'}|in'put\n$x")


def test_without_input_it_reads_nothing_and_a_missing_folder_is_126(episode, tmp_path):
    assert episode._as_account(["cat"], None, "/", {}, "0", 30).stdout == ""
    assert episode._as_account(["true"], None, str(tmp_path / "absent"), {}, "root", 30).returncode == 126


def test_another_account_runs_through_runuser(episode):
    ran = episode._as_account(["id", "-un"], None, "/", {}, "nobody", 30)
    assert (ran.returncode, ran.stdout.strip()) == (0, "nobody")
