"""Stopping the agent's processes before verification: the scripts' syntax for each profile, and
the kill of what a user started during the episode, run for real on this host (LocalShell)."""

import os
import pwd
import subprocess
import time

import pytest

from fakes.display import LocalShell
from runner.quarantine import _linux_freeze_script, _linux_kill_new_script, _windows_stop_script, quarantine
from runner.script_syntax import powershell_errors
from runner.catalog import DesktopUser
from runner.task_scripts import _linux_prelude, _windows_prelude

USER = DesktopUser("nobody", "/nonexistent")


@pytest.mark.parametrize("script", [_linux_freeze_script(USER), _linux_kill_new_script(USER, {1, 2}),
                                    _linux_prelude("/run/cu-task", USER, "setup"),
                                    _linux_prelude("/run/cu-task", USER, "verify")])
def test_linux_scripts_parse(script, tmp_path):
    path = tmp_path / "s.sh"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("script", [_windows_stop_script(USER, {4, 8}), _windows_stop_script(USER, set()),
                                    _windows_prelude("C:\\cu-task", DesktopUser("cu", "C:\\Users\\cu"))])
def test_windows_scripts_parse(script):
    assert powershell_errors(script.encode()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_processes_started_during_the_episode_are_killed_and_the_others_spared():
    uid = pwd.getpwnam("nobody").pw_uid
    before = subprocess.Popen(["runuser", "-u", "nobody", "--", "sleep", "300"])
    try:
        time.sleep(0.3)
        spared = {int(p) for p in subprocess.run(["pgrep", "-u", "nobody"], capture_output=True,
                                                 text=True).stdout.split()}
        # What the "agent" starts afterwards, daemonized so it is nobody's child.
        subprocess.run(["runuser", "-u", "nobody", "--", "sh", "-c", "setsid sleep 301 >/dev/null 2>&1 &"], check=True)
        time.sleep(0.3)
        said = quarantine(LocalShell(), USER, "linux", keep=spared)
        assert "killed" in said
        left = subprocess.run(["pgrep", "-u", str(uid), "-a"], capture_output=True, text=True).stdout
        assert "sleep 301" not in left and "sleep 300" in left
    finally:
        subprocess.run(["pkill", "-u", "nobody", "-x", "sleep"])
        before.wait()
