"""SshShell.run against a scripted sshd: output that trails the exit status is kept, and
a background process holding stdout open does not hold the command up."""

import subprocess
import threading

import paramiko
import pytest

from runner.guest.ssh import SshShell
from fakes.sshd import Eof, Exit, FakeSshServer, Out, Pause, Reached


def _keypair(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return paramiko.Ed25519Key.from_private_key_file(str(path)), path.with_suffix(".pub").read_text()


@pytest.fixture
def keys(tmp_path):
    host_key, host_pub = _keypair(tmp_path / "host")
    client_key, _ = _keypair(tmp_path / "client")
    return host_key, host_pub, client_key, tmp_path / "client"


def _run(keys, handler, script, timeout):
    """Runs SCRIPT through SshShell against a fake sshd that answers with HANDLER's steps."""
    host_key, host_pub, client_key, client_path = keys
    with FakeSshServer(host_key, client_key, handler) as server:
        shell = SshShell("127.0.0.1", server.port, "user", client_path, host_pub)
        try:
            return shell.run(script, timeout=timeout)
        finally:
            shell.close()


def test_output_sent_after_the_exit_status_is_not_lost(keys):
    # sshd may report the exit status before it forwards the script's last output:
    # the verifier's final FAIL line must still be read.
    scripts = []

    def handler(command, script):
        scripts.append(script)
        return [Out(b"PASS\n"), Exit(0), Pause(0.3), Out(b"FAIL it changed its mind\n"), Eof()]

    result = _run(keys, handler, "echo PASS; echo 'FAIL it changed its mind'\n", timeout=30)
    assert result.exit_code == 0
    assert result.stdout == "PASS\nFAIL it changed its mind\n"
    assert scripts == [b"echo PASS; echo 'FAIL it changed its mind'\n"]


def test_a_background_process_holding_stdout_does_not_hold_the_command(keys):
    # A setup script that starts an app without redirecting it leaves stdout open: the
    # command is over when the script exits, not when the app does.
    app_exited = threading.Event()

    def handler(command, script):
        return [Out(b"started\n"), Exit(0), Pause(20), Reached(app_exited), Out(b"app exited\n"), Eof()]

    result = _run(keys, handler, "mousepad\n", timeout=60)
    returned_before_the_app_exited = not app_exited.is_set()
    assert result.exit_code == 0 and result.stdout == "started\n"
    assert returned_before_the_app_exited


def test_output_past_the_cap_ends_the_read_with_its_reason(keys, monkeypatch):
    from runner.errors import OutputTooLarge
    monkeypatch.setattr("runner.guest.ssh.MAX_OUTPUT_BYTES", 256 * 1024)

    def handler(command, script):
        return [Out(b"x" * 65536)] * 20 + [Exit(0), Eof()]

    with pytest.raises(OutputTooLarge, match="the read was ended"):
        _run(keys, handler, "yes\n", timeout=30)


def test_a_first_key_exchange_slower_than_the_first_wait_is_waited_for_again(keys, monkeypatch):
    # A guest just restored under TCG has sshd's code to translate again: its first key exchange
    # has taken over the 10 s a command's connection waited (the MCP test's first window listing
    # failed with paramiko's "No existing session"). Scaled down: waits of 0.5 s and then 10 s.
    monkeypatch.setattr("runner.guest.ssh._RECONNECT_TIMEOUTS", (0.5, 10.0))
    host_key, host_pub, client_key, client_path = keys
    handler = lambda command, script: [Out(b"hello\n"), Exit(0), Eof()]  # noqa: E731
    with FakeSshServer(host_key, client_key, handler, first_kex_stall=2.0) as server:
        shell = SshShell("127.0.0.1", server.port, "user", client_path, host_pub)
        try:
            result = shell.run("echo hello\n", timeout=30)
        finally:
            shell.close()
    assert result.stdout == "hello\n" and server.connections == 2


def test_a_key_exchange_that_never_finishes_is_named(keys, monkeypatch):
    from runner.errors import GuestUnreachable
    monkeypatch.setattr("runner.guest.ssh._RECONNECT_TIMEOUTS", (0.5,))
    host_key, host_pub, client_key, client_path = keys
    with FakeSshServer(host_key, client_key, lambda c, s: [], first_kex_stall=3.0) as server:
        shell = SshShell("127.0.0.1", server.port, "user", client_path, host_pub)
        with pytest.raises(GuestUnreachable, match="the SSH key exchange did not finish in 0.5 s"):
            shell.run("true\n", timeout=30)
        shell.close()
