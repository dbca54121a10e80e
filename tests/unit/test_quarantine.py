"""Stopping the agent's processes before verification: the scripts' syntax for each profile, and
the kill of what a user started during the episode, run for real on this host (LocalShell)."""

import os
import pwd
from pathlib import Path
import signal
import subprocess
import time

import pytest

from fakes.display import LocalShell
from runner.errors import InfraError
from runner.profiles import DesktopUser, get_profile
from runner.profiles.linux import quarantine_steps
from runner.scoring.quarantine import quarantine, user_processes
from runner.profiles.listing import Watch
from runner.tasks.syntax import powershell_errors
from runner.profiles.parts import FileTools, Quarantine
from runner.profiles.listing import WriteSetLister

USER = DesktopUser("nobody", "/nonexistent")
LINUX, WINDOWS = get_profile("linux"), get_profile("windows")
LINUX_STOP, WINDOWS_STOP = LINUX.part(Quarantine), WINDOWS.part(Quarantine)
LINUX_FILES, WINDOWS_FILES = LINUX.part(FileTools), WINDOWS.part(FileTools)
WINDOWS_USER = DesktopUser("cu", "C:\\Users\\cu")


@pytest.mark.parametrize("script", [LINUX_STOP.quarantine_script(USER, None),
                                    LINUX_STOP.quarantine_script(USER, frozenset({"1:5", "2:9"})),
                                    LINUX_STOP.processes_script(USER),
                                    LINUX.scripts.privileged_prelude("/run/cu-task", USER, "setup"),
                                    LINUX.scripts.privileged_prelude("/run/cu-task", USER, "verify"),
                                    LINUX.scripts.stage_script("/run/cu-task", ["a", "b/c"]),
                                    LINUX_FILES.list_files_script("/home/cu", "/home/cu/x"),
                                    LINUX_FILES.read_file_script("/home/cu", "/home/cu/x", 10)])
def test_linux_scripts_parse(script, tmp_path):
    path = tmp_path / "s.sh"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)], capture_output=True).returncode == 0


@pytest.mark.parametrize("script", [
    WINDOWS_STOP.quarantine_script(WINDOWS_USER, frozenset({"4:1", "8:2"})),
    WINDOWS_STOP.quarantine_script(WINDOWS_USER, frozenset()),
    WINDOWS.scripts.privileged_prelude("C:\\cu-task", WINDOWS_USER, "verify"), WINDOWS.scripts.agent_prelude("C:\\cu-oracle"),
    WINDOWS.scripts.stage_script("C:\\cu-task", ["a", "b/c"]), WINDOWS.scripts.remove_script("C:\\cu-task"),
    WINDOWS.scripts.hand_home_script(WINDOWS_USER), WINDOWS.scripts.grant_admin_script(WINDOWS_USER),
    WINDOWS.scripts.clock_script(1.5e9), WINDOWS.part(WriteSetLister).list_script(Watch(("C:\\evals", "C:\\Users\\cu"))),
    WINDOWS_STOP.processes_script(WINDOWS_USER),
    WINDOWS_FILES.list_files_script("C:\\Users\\cu", "C:\\Users\\cu\\x"),
    WINDOWS_FILES.read_file_script("C:\\Users\\cu", "C:\\Users\\cu\\x", 10)])
def test_windows_scripts_parse(script):
    assert powershell_errors(script.encode()) == []


_STARTED: list[subprocess.Popen] = []  # each runuser, ended by the nobody_processes fixture


def nobodys(*argv: str) -> subprocess.Popen:
    proc = subprocess.Popen(["runuser", "-u", "nobody", "--", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _STARTED.append(proc)
    return proc


def running(pattern: str) -> dict[int, str]:
    """Nobody's processes whose command line holds PATTERN: PID -> state."""
    found = {}
    for line in subprocess.run(["pgrep", "-u", "nobody", "-f", pattern], capture_output=True,
                               text=True).stdout.split():
        try:
            found[int(line)] = Path(f"/proc/{line}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            pass
    return found


@pytest.fixture
def nobody_processes():
    yield
    subprocess.run(["pkill", "-9", "-u", "nobody"])
    # runuser stops itself when its child is stopped (su's job control), as the quarantine stops
    # a session manager; stopped, it never reaps the child it outlived, and that zombie, still
    # nobody's xfce4-session, was found by the next run's quarantine on the same machine.
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(timeout=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_processes_started_during_the_episode_are_killed_and_the_others_spared(nobody_processes):
    nobodys("sleep", "300")
    time.sleep(0.3)
    spared = user_processes(LocalShell(), USER, LINUX)
    assert spared and all(":" in token for token in spared)
    # What the "agent" starts afterwards, daemonized so it is nobody's child.
    subprocess.run(["runuser", "-u", "nobody", "--", "sh", "-c", "setsid sleep 301 >/dev/null 2>&1 &"], check=True)
    time.sleep(0.3)
    said = quarantine(LocalShell(), USER, LINUX, keep=spared)
    assert "killed" in said
    assert running("sleep 301") == {} and list(running("sleep 300").values()) == ["S"]


@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_a_kept_pid_with_another_start_time_is_another_process_and_is_killed(nobody_processes):
    nobodys("sleep", "304")
    time.sleep(0.3)
    (pid,) = running("sleep 304")
    # The PID the agent got again for a process of its own: same number, another start.
    said = quarantine(LocalShell(), USER, LINUX, keep=frozenset({f"{pid}:1"}))
    assert "killed" in said and running("sleep 304") == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_a_kept_shell_on_a_terminal_is_killed_and_a_kept_process_the_agent_stopped_runs_again(nobody_processes):
    nobodys("script", "-q", "-c", "sleep 302", "/dev/null")  # sleep 302 runs on a pseudo-terminal
    nobodys("sleep", "303")
    time.sleep(0.5)
    spared = user_processes(LocalShell(), USER, LINUX)
    for pid in running("^sleep 303"):
        os.kill(pid, 19)  # SIGSTOP, as the agent could have done to the window manager
    said = quarantine(LocalShell(), USER, LINUX, keep=spared)
    assert "terminals' shells" in said
    assert running("^sleep 302") == {}  # on a terminal: the agent could have typed into it
    assert list(running("^sleep 303").values()) == ["S"]  # continued


def test_the_desktop_users_id_comes_from_passwd_without_a_program():
    found = subprocess.run(["sh", "-c", quarantine_steps(USER, None) + 'desktop_uid\necho "$u"\n'],
                           capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.strip() == str(pwd.getpwnam("nobody").pw_uid)
    missing = subprocess.run(["sh", "-c", quarantine_steps(DesktopUser("no-such-user-x", "/x"), None)
                              + "desktop_uid\necho reached\n"], capture_output=True, text=True)
    assert missing.returncode == 3 and "reached" not in missing.stdout and "not in /etc/passwd" in missing.stderr


ZOMBIE_LEADER = ("import ctypes, threading, time; threading.Thread(target=time.sleep, args=(305,)).start(); "
                 "ctypes.CDLL(None).pthread_exit(None)")


def leaders_exited() -> list[int]:
    """Nobody's python3 processes whose leader thread shows Z while another thread runs (a
    zombie's command line is empty, so they are found by name). A true zombie has no thread
    left: one of an earlier run on this machine, whose parent (PID 1, here a process that reaps
    nothing) never reaped it, is not this test's."""
    pids = subprocess.run(["pgrep", "-u", "nobody", "-x", "python3"], capture_output=True, text=True).stdout.split()
    found = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z" \
                    and len(list(Path(f"/proc/{pid}/task").iterdir())) > 1:
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_a_thread_group_whose_leader_exited_is_alive_and_is_killed(nobody_processes):
    spared = user_processes(LocalShell(), USER, LINUX)
    nobodys("python3", "-c", ZOMBIE_LEADER)  # the agent's: its leader exits, a thread runs on
    deadline = time.monotonic() + 10
    while not (zombies := leaders_exited()):
        assert time.monotonic() < deadline, "the leader thread never exited"
        time.sleep(0.1)
    (pid,) = zombies
    assert len(list(Path(f"/proc/{pid}/task").iterdir())) == 2  # Z, yet a thread lives
    quarantine(LocalShell(), USER, LINUX, keep=spared)
    assert not Path(f"/proc/{pid}").exists() or not [t for t in Path(f"/proc/{pid}/task").iterdir()
                                                     if t.name != str(pid)]


# -- round three, class 4: what the kept processes could start again after the kill.

@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_a_kept_session_manager_is_stopped_for_good_and_others_run_on(nobody_processes):
    """A session manager restarts its clients (XSMP): kept, it is stopped and never continued,
    while other kept processes are continued. Found by its name (comm), as in the guest."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="cu-run-test-"))  # nobody may run what is in it
    folder.chmod(0o755)
    manager = folder / "xfce4-session"
    manager.write_bytes(Path("/bin/sleep").read_bytes())
    manager.chmod(0o755)
    nobodys(str(manager), "306")
    nobodys("sleep", "307")
    deadline = time.monotonic() + 10
    while not (running("xfce4-session 306") and running("^sleep 307")):
        assert time.monotonic() < deadline, "nobody's processes did not start"
        time.sleep(0.05)
    spared = user_processes(LocalShell(), USER, LINUX)
    said = quarantine(LocalShell(), USER, LINUX, keep=spared)
    (pid,) = running("xfce4-session 306")
    assert f"stopped the processes that start others for the user: {pid}" in said
    assert list(running("xfce4-session 306").values()) == ["T"]
    assert list(running("^sleep 307").values()) == ["S"]
    subprocess.run(["pkill", "-9", "-u", "nobody"])
    subprocess.run(["rm", "-rf", str(folder)])


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts over the user's folders")
def test_the_users_own_session_bus_services_are_hidden_from_the_bus(nobody_processes, tmp_path):
    """A service file the agent left where the session bus looks is out of its sight after the
    quarantine: an empty read-only tmpfs lies over the folder."""
    home = tmp_path / "home"
    services = home / ".local" / "share" / "dbus-1" / "services"
    services.mkdir(parents=True)
    (services / "org.example.Fake.service").write_text("[D-BUS Service]\nName=org.example.Fake\nExec=/bin/true\n")
    user = DesktopUser("nobody", str(home))
    try:
        said = quarantine(LocalShell(), user, LINUX, keep=frozenset())
        assert f"hid the user's session-bus services: {services}" in said
        assert list(services.iterdir()) == []
        with pytest.raises(OSError):
            (services / "new.service").write_text("x")
    finally:
        subprocess.run(["umount", str(services)])
    assert [p.name for p in services.iterdir()] == ["org.example.Fake.service"]  # the disk as the agent left it


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts over the user's folders")
@pytest.mark.parametrize("linked", ["services", "dbus-1", ".local"])
def test_root_follows_no_link_of_the_agents_to_hide_a_folder(nobody_processes, tmp_path, linked):
    """A link anywhere on the way to the bus's service folder once led root's tmpfs over the
    folder of the agent's choice (another process's /proc entry, the X server's socket folder).
    Now nothing is mounted, and the quarantine fails: the agent's doing."""
    home, chosen = tmp_path / "home", tmp_path / "chosen"
    chosen.mkdir()
    (chosen / "kept.txt").write_text("x")
    parts = [".local", "share", "dbus-1", "services"]
    at = parts.index(linked)
    (home / Path(*parts[:at])).mkdir(parents=True, exist_ok=True)
    (home / Path(*parts[:at + 1])).symlink_to(chosen)
    if at + 1 < len(parts):  # the rest of the way, in the folder the link leads to
        (chosen / Path(*parts[at + 1:])).mkdir(parents=True)
    with pytest.raises(InfraError, match="a link or a file is on the way to it, which is not followed"):
        quarantine(LocalShell(), DesktopUser("nobody", str(home)), LINUX, keep=frozenset())
    assert str(tmp_path) not in Path("/proc/self/mounts").read_text()
    assert (chosen / "kept.txt").read_text() == "x"


def test_nothing_is_hidden_where_the_user_made_no_bus_services(tmp_path):
    script = (quarantine_steps(DesktopUser("nobody", str(tmp_path)), frozenset())
              + 'u=99999\nhide_bus_services\necho "[$hidden]"\n')
    found = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout == "[]\n"



@pytest.mark.skipif(os.geteuid() != 0, reason="starts processes as another user")
def test_a_process_gone_from_the_list_makes_the_kill_look_again(nobody_processes):
    # A process that forks and exits is gone by the time the loop reaches its PID, and its child
    # was not on the list. Before, a gone PID counted as dealt with, and a round that killed
    # nothing ended the loop: the child lived on through verification. pgrep stands in for the
    # race (the narrowest seam): its first answer is a PID already gone, its next ones the truth.
    nobodys("sleep", "305")
    deadline = time.monotonic() + 10
    while not running("^sleep 305"):
        assert time.monotonic() < deadline, "nobody's sleep did not start"
        time.sleep(0.05)
    script = (quarantine_steps(USER, None) + "desktop_uid\n"
              'pgrep() { if [ -e "$listed" ]; then command pgrep "$@"; else : > "$listed"; echo 4194304; fi; }\n'
              'listed=$(mktemp -u)\nkill_outside in_user_slice\nrm -f "$listed"\n')
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert running("^sleep 305") == {}
