"""QemuAgentShell, the admin channel over the QEMU guest agent, against FakeQemuAgent: the
agent's commands carried out by real processes on this host. The real agent in the real
guest is every e2e test's admin channel on linux-test (tests/e2e)."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from fakes.qemu_agent import LIBVIRT_MAX_STRING, FakeQemuAgent, pid_alive
from runner.errors import CommandTimeout, GuestUnreachable
from runner.guest.qga import QemuAgentShell

ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CU_MARK": "admin"}


@pytest.fixture
def agent() -> FakeQemuAgent:
    return FakeQemuAgent()


@pytest.fixture
def shell(agent: FakeQemuAgent, tmp_path: Path) -> QemuAgentShell:
    return QemuAgentShell(agent, environment=ENV, workdir=str(tmp_path), spool=str(tmp_path / "spool"))


def test_output_exit_code_and_line_numbers_are_the_scripts(shell: QemuAgentShell) -> None:
    result = shell.run("echo out\necho err >&2\nno-such-command-here\nexit 7\n")
    assert (result.exit_code, result.stdout) == (7, "out\n")
    # The spool redirection rides on line 1, so a script's own line numbers are unchanged.
    assert result.stderr.startswith("err\n") and ": 3: no-such-command-here: not found" in result.stderr


def test_the_environment_is_the_one_given_and_the_script_starts_in_workdir(shell: QemuAgentShell,
                                                                            tmp_path: Path) -> None:
    result = shell.run("env | sort; pwd")
    lines = result.stdout.splitlines()
    assert "CU_MARK=admin" in lines and lines[-1] == str(tmp_path)
    # Nothing of this process's own environment leaks in; sh adds only PWD (and maybe OLDPWD).
    assert {line.split("=", 1)[0] for line in lines[:-1]} <= {"PATH", "CU_MARK", "PWD", "OLDPWD"}


def test_the_spool_is_private(shell: QemuAgentShell, tmp_path: Path) -> None:
    shell.run("echo secret-verdict")
    assert stat.S_IMODE((tmp_path / "spool").stat().st_mode) == 0o700


def test_a_command_that_fails_before_its_redirection_is_never_handed_an_earlier_output(
        agent: FakeQemuAgent, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    shell = QemuAgentShell(agent, environment=ENV, spool=str(spool))
    assert shell.run("echo earlier-verdict; echo earlier-error >&2").stdout == "earlier-verdict\n"
    # The next command reuses those files; make its redirection fail (even for root) by
    # turning its stdout file into a folder, with the earlier output still in its stderr file.
    (out,) = spool.glob("*.out")
    out.unlink()
    out.mkdir()
    result = shell.run("echo later")
    assert result.exit_code != 0 and (result.stdout, result.stderr) == ("", "")


def test_output_far_over_libvirts_reply_limit_comes_back_whole(agent: FakeQemuAgent,
                                                               shell: QemuAgentShell) -> None:
    # A write-set listing of a home the agent filled with files can be this large.
    result = shell.run("head -c 25000000 /dev/zero | tr '\\0' a; echo; head -c 12000000 /dev/zero | tr '\\0' b >&2")
    assert len(result.stdout) == 25_000_001 and set(result.stdout[:-1]) == {"a"}
    assert len(result.stderr) == 12_000_000
    assert agent.largest_reply <= LIBVIRT_MAX_STRING


def test_a_script_too_long_for_one_request_still_runs_as_a_script(agent: FakeQemuAgent, tmp_path: Path) -> None:
    # A task's files travel inside its script (staged_run_script): a large one cannot ride on stdin.
    shell = QemuAgentShell(agent, environment=ENV, spool=str(tmp_path / "fresh-spool"))
    blob = "x" * (9 * 2**20)
    result = shell.run(f"cat > {tmp_path}/blob <<'EOF'\n{blob}\nEOF\necho $(wc -c < {tmp_path}/blob)\nexit 3\n")
    assert (result.exit_code, result.stdout) == (3, f"{len(blob) + 1}\n")
    assert agent.largest_request <= LIBVIRT_MAX_STRING
    (script,) = (tmp_path / "fresh-spool").glob("*.in")
    assert script.stat().st_size == 0  # the script (a task's files, maybe) is not kept


def test_a_timed_out_command_is_killed_in_the_guest(shell: QemuAgentShell, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(CommandTimeout) as caught:
        shell.run(f"echo started; echo $$ > {pid_file}; sleep 60", timeout=1)
    assert caught.value.stdout == "started\n"
    pid = int(pid_file.read_text())
    for _ in range(50):  # timeout's KILL follows its TERM within 2 s
        if not pid_alive(pid):
            break
        time.sleep(0.1)
    assert not pid_alive(pid)


def test_a_script_exiting_124_early_is_a_result_not_a_timeout(shell: QemuAgentShell) -> None:
    assert shell.run("exit 124", timeout=30).exit_code == 124


def test_a_script_killed_by_a_signal_exits_as_a_shell_reports_it(shell: QemuAgentShell) -> None:
    assert shell.run("kill -9 $$").exit_code == 137


def test_a_background_process_holding_the_output_does_not_hold_the_command(
        shell: QemuAgentShell, tmp_path: Path) -> None:
    pid_file = tmp_path / "bg"
    result = shell.run(f"sleep 30 & echo $! > {pid_file}; echo done")
    assert result.stdout == "done\n"
    pid = int(pid_file.read_text())
    try:
        assert pid_alive(pid)  # returned while the background process still held stdout and stderr
    finally:
        os.kill(pid, 9)


def test_commands_at_once_keep_their_own_output(shell: QemuAgentShell) -> None:
    results: dict[int, str] = {}

    def one(n: int) -> None:
        results[n] = shell.run(f"sleep 0.{n % 3}; echo {n}").stdout

    threads = [threading.Thread(target=one, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {n: f"{n}\n" for n in range(6)}


def test_files_go_in_and_out_and_a_missing_one_says_so(shell: QemuAgentShell, tmp_path: Path) -> None:
    local = tmp_path / "in.bin"
    local.write_bytes(os.urandom(5 * 2**20 + 3))
    shell.put(local, str(tmp_path / "guest.bin"))
    shell.get(str(tmp_path / "guest.bin"), tmp_path / "back.bin")
    assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
    with pytest.raises(FileNotFoundError):
        shell.get(str(tmp_path / "missing"), tmp_path / "x")


def test_wait_ready_waits_for_the_agent_to_connect(tmp_path: Path) -> None:
    agent = FakeQemuAgent(unreachable_pings=3)
    shell = QemuAgentShell(agent, environment=ENV, spool=str(tmp_path / "spool"))
    shell.wait_ready(10)
    assert agent.calls.count("guest-ping") == 4


def test_an_agent_that_never_connects_is_unreachable(tmp_path: Path) -> None:
    shell = QemuAgentShell(FakeQemuAgent(unreachable_pings=10**6), environment=ENV, spool=str(tmp_path / "s"))
    with pytest.raises(GuestUnreachable, match="did not answer within 1 s"):
        shell.wait_ready(1)


def test_a_program_the_guest_lacks_is_the_channel_failing(agent: FakeQemuAgent, tmp_path: Path) -> None:
    shell = QemuAgentShell(agent, environment=ENV, spool=str(tmp_path / "s"), timeout_path="/no/such/timeout")
    with pytest.raises(GuestUnreachable, match="did not start the command"):
        shell.run("true")


def test_output_past_the_cap_ends_the_read_with_its_reason(shell: QemuAgentShell, monkeypatch) -> None:
    from runner.errors import OutputTooLarge
    monkeypatch.setattr("runner.guest.qga.MAX_OUTPUT_BYTES", 256 * 1024)
    with pytest.raises(OutputTooLarge, match="the read was ended"):
        shell.run("head -c 1000000 /dev/zero")
    assert shell.run("echo still usable").stdout == "still usable\n"
