"""A task's script and its files in one guest command (the Linux profile's staged_run_script):
the verifier contract holds exactly as with files copied one by one, and the folder is gone
after, whatever the script did. Run with sh on this host (LocalShell), as the guest would."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from fakes.display import LocalShell
from fakes.profiles import host_folders
from runner.errors import CommandTimeout, InfraError
from runner.profiles import PROFILES, DesktopUser, register
from runner.tasks.model import load_suite
from runner.tasks.scripts import run_as_agent, run_privileged
from typing_extensions import override


class CountingShell(LocalShell):
    def __init__(self) -> None:
        self.commands: list[str] = []

    @override
    def run(self, script: str, timeout: float = 60.0):
        self.commands.append(script)
        return super().run(script, timeout)

    @override
    def put(self, local, remote):
        raise AssertionError("no file is copied on its own")


class ProgramsSeen(CountingShell):
    """Notes in LOG each run of base64 or tar, through functions of those names defined in front of
    each command, which run the programs themselves."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    @override
    def run(self, script: str, timeout: float = 60.0):
        shims = "".join(f'{name}() {{ echo {name} >> {shlex.quote(str(self.log))}; command {name} "$@"; }}\n'
                        for name in ("base64", "tar"))
        result = super().run(shims + script, timeout)
        self.commands[-1] = script
        return result

    def seen(self) -> list[str]:
        return sorted(set(self.log.read_text().split())) if self.log.exists() else []


@pytest.fixture
def guest(tmp_path):
    profile = register(host_folders(tmp_path / "guest", "linux-here"))
    (tmp_path / "guest" / "home" / "alice").mkdir(parents=True)
    yield profile
    del PROFILES["linux-here"]


def make_task(tmp_path: Path, verify: str, extra: dict[str, str] | None = None):
    folder = tmp_path / "suite" / "t"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text("id: t\ninstruction: x\nprofile: linux-here\n")
    (folder / "oracle.sh").write_text('cat "$TASK_DIR/data/nested.txt"\n')
    (folder / "verify.sh").write_text(verify)
    for name, text in (extra or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (task,) = load_suite(str(tmp_path / "suite")).tasks
    return task


def test_one_command_carries_the_files_and_keeps_output_and_exit_code(guest, tmp_path):
    task = make_task(tmp_path, 'cat "$TASK_DIR/data/nested.txt"; stat -c %a "$TASK_DIR" "$TASK_DIR/data/nested.txt"\n'
                               'echo to-stderr >&2; read -r line && echo "stdin gave: $line"; exit 7\n',
                     {"data/nested.txt": "nested file\n"})
    shell = CountingShell()
    result = run_privileged(shell, task, "verify", DesktopUser("alice", guest.access.home("alice")), "verify")
    assert len(shell.commands) == 1
    assert result.exit_code == 7 and result.stderr == "to-stderr\n"
    # The files, readable by the shell's account alone; stdin is empty, not the rest of the command.
    assert result.stdout == "nested file\n700\n600\n"
    assert not Path(guest.scripts.admin_task_dir).exists()


def test_the_oracle_is_staged_the_same_way_in_the_users_folder(guest, tmp_path):
    task = make_task(tmp_path, "echo PASS\n", {"data/nested.txt": "for the oracle\n"})
    shell = CountingShell()
    result = run_as_agent(shell, task, "oracle")
    assert (result.exit_code, result.stdout, len(shell.commands)) == (0, "for the oracle\n", 1)
    assert not Path(guest.scripts.agent_task_dir).exists()


def test_a_script_killed_at_its_timeout_still_has_its_folder_removed(guest, tmp_path):
    task = make_task(tmp_path, "sleep 30\n")
    with pytest.raises(CommandTimeout):
        run_privileged(LocalShell(), task, "verify", DesktopUser("alice", guest.access.home("alice")), "verify", timeout=1)
    assert not Path(guest.scripts.admin_task_dir).exists()


def test_staging_that_fails_is_infrastructure_not_a_verdict(guest, tmp_path):
    Path(guest.scripts.admin_task_dir).parent.mkdir(parents=True, exist_ok=True)
    blocker = tmp_path / "guest" / "not-a-folder"
    blocker.write_text("")
    guest.scripts.admin_task_dir = str(blocker / "admin-task")  # its parent is a file: mkdir fails
    task = make_task(tmp_path, "echo PASS\n")
    with pytest.raises(InfraError, match="could not stage the task's files"):
        run_privileged(LocalShell(), task, "verify", DesktopUser("alice", guest.access.home("alice")), "verify")


def test_a_script_that_exits_125_by_itself_is_its_own_result(guest, tmp_path):
    task = make_task(tmp_path, "echo FAIL; exit 125\n")
    result = run_privileged(LocalShell(), task, "verify", DesktopUser("alice", guest.access.home("alice")), "verify")
    assert (result.exit_code, result.stdout) == (125, "FAIL\n")


def test_a_folder_left_by_an_earlier_run_is_made_afresh(guest, tmp_path):
    left = Path(guest.scripts.admin_task_dir)
    left.mkdir(parents=True)
    (left / "planted.sh").write_text("echo planted\n")
    left.chmod(0o755)
    task = make_task(tmp_path, 'ls "$TASK_DIR"; stat -c %a "$TASK_DIR"\n')
    result = run_privileged(LocalShell(), task, "verify", DesktopUser("alice", guest.access.home("alice")), "verify")
    assert "planted.sh" not in result.stdout and result.stdout.splitlines()[-1] == "700"
    assert not left.exists()


def test_the_script_is_its_own_shell_for_exit_and_set_e(guest, tmp_path):
    # It runs in a subshell of the staging command: `set -e` and `exit` end the script alone,
    # and the folder is still removed after.
    task = make_task(tmp_path, "set -e\necho before\nfalse\necho never\n")
    result = run_privileged(LocalShell(), task, "verify", DesktopUser("alice", guest.access.home("alice")), "verify")
    assert (result.exit_code, result.stdout) == (1, "before\n")
    assert not Path(guest.scripts.admin_task_dir).exists()


def test_text_files_are_written_by_the_shell_and_binary_ones_travel_as_a_tar(guest, tmp_path):
    """Text files (quotes, backslashes, no final newline, a nested folder) are written by the
    shell's printf: no base64 or tar runs. A binary file sends them all as a tar instead. The
    bytes and the modes are the same either way."""
    odd = "it's \"quoted\" \\ $HOME `x` %s\n\ttab\nno final newline"
    check = ('cat "$TASK_DIR/data/odd.txt"; echo; stat -c %a "$TASK_DIR/data" "$TASK_DIR/data/odd.txt"; '
             'if [ -f "$TASK_DIR/blob.bin" ]; then od -An -tx1 "$TASK_DIR/blob.bin" | tr -d " \\n"; fi\n')
    user = DesktopUser("alice", guest.access.home("alice"))
    text_task = make_task(tmp_path, check, {"data/odd.txt": odd})
    shell = ProgramsSeen(tmp_path / "text-ran")
    assert run_privileged(shell, text_task, "verify", user, "verify").stdout == odd + "\n700\n600\n"
    assert len(shell.commands) == 1 and shell.seen() == []

    (text_task.folder / "blob.bin").write_bytes(b"\x00\xff\x01")
    shell = ProgramsSeen(tmp_path / "tar-ran")
    assert run_privileged(shell, text_task, "verify", user, "verify").stdout == odd + "\n700\n600\n00ff01"
    assert len(shell.commands) == 1 and shell.seen() == ["base64", "tar"]
    assert not Path(guest.scripts.admin_task_dir).exists()
