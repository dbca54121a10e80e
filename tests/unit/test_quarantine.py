"""Stopping the agent's processes before verification: the scripts' syntax for each profile, and
the kill of what a user started during the episode, run for real on this host (LocalShell)."""

import os
import pwd
import subprocess
import time

import pytest

from fakes.display import LocalShell
from runner.profiles import DesktopUser, get_profile
from runner.scoring.quarantine import quarantine
from runner.tasks.syntax import powershell_errors

USER = DesktopUser("nobody", "/nonexistent")
LINUX, WINDOWS = get_profile("linux"), get_profile("windows")
WINDOWS_USER = DesktopUser("cu", "C:\\Users\\cu")


@pytest.mark.parametrize("script", [LINUX.quarantine_script(USER, None), LINUX.quarantine_script(USER, {1, 2}),
                                    LINUX.privileged_prelude("/run/cu-task", USER, "setup"),
                                    LINUX.privileged_prelude("/run/cu-task", USER, "verify"),
                                    LINUX.stage_script("/run/cu-task", ["a", "b/c"]),
                                    LINUX.list_files_script("/home/cu", "/home/cu/x"),
                                    LINUX.read_file_script("/home/cu", "/home/cu/x", 10)])
def test_linux_scripts_parse(script, tmp_path):
    path = tmp_path / "s.sh"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("script", [
    WINDOWS.quarantine_script(WINDOWS_USER, {4, 8}), WINDOWS.quarantine_script(WINDOWS_USER, set()),
    WINDOWS.privileged_prelude("C:\\cu-task", WINDOWS_USER, "verify"), WINDOWS.agent_prelude("C:\\cu-oracle"),
    WINDOWS.stage_script("C:\\cu-task", ["a", "b/c"]), WINDOWS.remove_script("C:\\cu-task"),
    WINDOWS.hand_home_script(WINDOWS_USER), WINDOWS.grant_admin_script(WINDOWS_USER), WINDOWS.clock_script(1.5e9),
    WINDOWS.list_script(("C:\\evals", "C:\\Users\\cu")), WINDOWS.processes_script(WINDOWS_USER),
    WINDOWS.list_files_script("C:\\Users\\cu", "C:\\Users\\cu\\x"),
    WINDOWS.read_file_script("C:\\Users\\cu", "C:\\Users\\cu\\x", 10)])
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
        said = quarantine(LocalShell(), USER, LINUX, keep=spared)
        assert "killed" in said
        left = subprocess.run(["pgrep", "-u", str(uid), "-a"], capture_output=True, text=True).stdout
        assert "sleep 301" not in left and "sleep 300" in left
    finally:
        subprocess.run(["pkill", "-u", "nobody", "-x", "sleep"])
        before.wait()


def test_the_desktop_users_id_comes_from_passwd_without_a_program():
    from runner.profiles.linux import _user_id

    found = subprocess.run(["sh", "-c", _user_id(DesktopUser("nobody", "/nonexistent")) + 'echo "$u"'],
                           capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.strip() == str(pwd.getpwnam("nobody").pw_uid)
    missing = subprocess.run(["sh", "-c", _user_id(DesktopUser("no-such-user-x", "/x")) + "echo reached"],
                             capture_output=True, text=True)
    assert missing.returncode == 3 and "reached" not in missing.stdout and "not in /etc/passwd" in missing.stderr
