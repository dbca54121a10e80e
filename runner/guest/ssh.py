"""GuestShell over SSH (paramiko), trusting only the image's pinned host key."""

from __future__ import annotations

import base64
import errno
import io
import logging
import secrets
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import paramiko

from runner.errors import CommandTimeout, GuestUnreachable
from runner.guest.base import MAX_OUTPUT_BYTES, ExecResult, GuestShell, NotReady, output_too_large, poll_until_ready
from typing_extensions import override

# paramiko logs every refused or cut-short handshake at ERROR while a guest boots;
# wait_ready() handles those, and real failures are raised with their cause.
logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)

# Slack the guest-side `timeout` gets before the host gives up on the channel.
_KILL_GRACE = 5.0
# How long output may trail the exit status before the command counts as finished.
_EOF_GRACE = 2.0
# A command line longer than this goes to the guest as a file: one SSH request holds ~256 KiB.
_INLINE_COMMAND_MAX = 64 * 1024
# A connection made when a command needs one: the first wait, then a longer one for a slow guest.
_RECONNECT_TIMEOUTS = (10.0, 30.0)


@dataclass(frozen=True)
class RawExec:
    """A command's exit code (None: it never reported one) and output, as bytes."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool


def _send_all(channel: paramiko.Channel, data: bytes) -> None:
    """Feeds DATA to a command's stdin, then closes it; a command that exits first ends it."""
    try:
        view = memoryview(data)
        while view:
            sent = channel.send(view[:65536])
            if sent <= 0:
                break
            view = view[sent:]
        channel.shutdown_write()
    except (OSError, EOFError, paramiko.SSHException):
        pass


def is_transient_ssh_error(exc: BaseException) -> bool:
    """Whether waiting and trying again may help.

    Transient: the noise of a guest still booting. QEMU's forward accepts before sshd
    listens, so the connection is refused, reset or closed before the banner.
    Permanent: what time cannot fix. A host key that is not the pinned one, a refused
    key, a server that offers no key type we pinned.
    """
    if isinstance(exc, (paramiko.BadHostKeyException, paramiko.AuthenticationException)):
        return False
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return True
    if isinstance(exc, paramiko.SSHException):
        return "known_hosts" not in str(exc)
    if isinstance(exc, (EOFError, socket.timeout, TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, OSError):
        return exc.errno in _TRANSIENT_ERRNOS
    return False


# ECONNRESET, ECONNREFUSED, EHOSTUNREACH, ETIMEDOUT, EPIPE, ECONNABORTED
_TRANSIENT_ERRNOS = {errno.ECONNRESET, errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ETIMEDOUT,
                     errno.EPIPE, errno.ECONNABORTED}


class SshShell(GuestShell):
    def __init__(self, host: str, port: int, user: str, key_path: Path, host_key: str, *,
                 environment: dict[str, str] | None = None) -> None:
        """HOST_KEY is the pinned public key line ('ssh-ed25519 AAAA...').

        ENVIRONMENT, when given, is all a command's script sees (env -i): nothing of the
        account's own environment reaches it, whatever its start-up files set.
        """
        self.host, self.port, self.user = host, port, user
        self._env_prefix = ("env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in environment.items()) + " "
                            if environment is not None else "")
        self._key = paramiko.Ed25519Key.from_private_key_file(str(key_path))
        kind, blob = host_key.split()[:2]
        self._host_key = paramiko.PKey.from_type_string(kind, base64.b64decode(blob))
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    @property
    def address(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    def _open(self, timeout: float) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        known = f"[{self.host}]:{self.port}" if self.port != 22 else self.host
        client.get_host_keys().add(known, self._host_key.get_name(), self._host_key)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                self.host, port=self.port, username=self.user, pkey=self._key,
                timeout=timeout, banner_timeout=timeout, auth_timeout=timeout,
                allow_agent=False, look_for_keys=False,
            )
        except paramiko.SSHException as exc:
            transport = client.get_transport()
            negotiating = transport is not None and transport.is_active() and not transport.initial_kex_done
            client.close()
            if negotiating:
                # paramiko's start_client stops waiting at the timeout without a word, and the
                # next step reports it as "No existing session".
                raise TimeoutError(f"the SSH key exchange did not finish in {timeout:g} s") from exc
            raise
        except BaseException:
            client.close()
            raise
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(5)
        return client

    def _connected(self) -> paramiko.SSHClient:
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is None or not transport.is_active():
                if self._client is not None:
                    self._client.close()
                self._client = None
                self._client = self._reconnect()
            return self._client

    def _reconnect(self) -> paramiko.SSHClient:
        """A connection for a guest known to be up (wait_ready answered, or a command ran), made
        on first use or after the last one dropped. Under TCG a guest just restored has all of
        sshd's code to translate again, and the key exchange of its first connection has been
        seen to take over 10 s: a transient failure is tried once more with a longer wait."""
        for attempt, timeout in enumerate(_RECONNECT_TIMEOUTS, 1):
            try:
                return self._open(timeout=timeout)
            except Exception as exc:
                if attempt == len(_RECONNECT_TIMEOUTS) or not is_transient_ssh_error(exc):
                    raise GuestUnreachable(f"SSH to {self.address} failed: {type(exc).__name__}: {exc}") from exc
                time.sleep(0.5)
        raise AssertionError("unreachable: the last attempt returns or raises")

    @override
    def wait_ready(self, timeout: float) -> float:
        def connect(left: float) -> None:
            try:
                client = self._open(timeout=min(10.0, max(1.0, left)))
            except Exception as exc:
                if is_transient_ssh_error(exc):
                    raise NotReady from exc
                raise GuestUnreachable(
                    f"SSH to {self.address} refused for good: {type(exc).__name__}: {exc}",
                    fix="the image's keys do not match the guest: rebuild it with cu-run image build --force",
                ) from exc
            with self._lock:
                if self._client is not None:
                    self._client.close()
                self._client = client

        return poll_until_ready(f"SSH to {self.address}", timeout, 0.5, connect)

    @override
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        # The guest kills the script at TIMEOUT; the host stops waiting a little later.
        command = f"exec {self._env_prefix}timeout -k 2 {max(1, round(timeout))} sh -s"
        raw = self._exchange(command, script.encode(), timeout)
        stdout, stderr = raw.stdout.decode(errors="replace"), raw.stderr.decode(errors="replace")
        # coreutils timeout exits 124 (or 137 after -k) when it had to stop the script;
        # a script that exits 124 by itself early is not a timeout.
        if raw.timed_out:
            raise CommandTimeout(f"command ran past {timeout:.0f} s in the guest and was killed",
                                 stdout=stdout, stderr=stderr)
        assert raw.exit_code is not None
        return ExecResult(raw.exit_code, stdout, stderr)

    def exec_argv(self, argv: list[str], *, stdin: bytes | None = None, cwd: str | None = None,
                  env: dict[str, str] | None = None, timeout: float = 60.0) -> RawExec:
        """ARGV run as this shell's user, in CWD with ENV added, STDIN fed to it, its output as
        bytes. ARGV[0] is found on the account's PATH. Nothing is parsed by a shell but what the
        fixed prelude does; a command line too long for one SSH request travels by SFTP first.
        The process group is killed at TIMEOUT (raw.timed_out)."""
        q = shlex.quote
        prelude = "".join(f"export {name}={q(value)}\n" for name, value in (env or {}).items())
        if cwd is not None:
            prelude += f"cd {q(cwd)} || exit 126\n"
        body = prelude + "exec " + " ".join(q(a) for a in argv) + "\n"
        # The wrappers by absolute path: the account's PATH is the user's to change.
        guard = f"{self._env_prefix}/usr/bin/timeout -k 2 {max(1, round(timeout))} /bin/sh -c"
        # Not exec'd (nor left for the login shell to exec, as the last command): a command killed by
        # a signal is then reported as a shell reports it (128 + the signal), where sshd's own report
        # of the signal reaches paramiko as -1.
        if len(body) <= _INLINE_COMMAND_MAX:
            command = f"{guard} {q(body)}; exit $?"
        else:
            script = f"/tmp/.cu-run-exec-{secrets.token_hex(8)}"
            self._sftp(lambda sftp: sftp.putfo(io.BytesIO(body.encode()), script), f"a command -> guest:{script}")
            # The script removes itself before it runs the command, so nothing of it stays behind.
            unpack = f'b=$(cat {script}); rm -f {script}; eval "$b"'
            command = f"{guard} {q(unpack)}; exit $?"
        return self._exchange(command, stdin, timeout)

    def _exchange(self, command: str, stdin: bytes | None, timeout: float) -> RawExec:
        """COMMAND on a new channel, STDIN sent beside the reading (a command may write before it
        has read all of it), until it exits or TIMEOUT and the kill grace pass."""
        client = self._connected()
        try:
            channel = client.get_transport().open_session(timeout=10)
            # Before the exec: the guest's timeout counts from the command's start (see QemuAgentShell).
            started = time.monotonic()
            channel.exec_command(command)
        except Exception as exc:
            raise GuestUnreachable(f"SSH to {self.address} failed to start a command: {exc}") from exc
        sender = threading.Thread(target=_send_all, args=(channel, stdin or b""), daemon=True)
        sender.start()
        out, err = bytearray(), bytearray()
        deadline = started + timeout + _KILL_GRACE
        exited_at: float | None = None
        try:
            while True:
                if channel.recv_ready():
                    out += channel.recv(65536)
                    _within_cap(out, err, self.address)
                elif channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                    _within_cap(out, err, self.address)
                elif channel.exit_status_ready():
                    # sshd may report the exit status before it has forwarded the last of
                    # the output, so the status alone is not the end: wait for EOF, but
                    # only briefly, since a background process the script left holding
                    # stdout would keep the channel open for as long as it lives.
                    exited_at = exited_at or time.monotonic()
                    if channel.eof_received or channel.closed or time.monotonic() - exited_at > _EOF_GRACE:
                        break
                    time.sleep(0.01)  # status_event stays set now: poll, do not spin
                elif channel.closed or not channel.get_transport().is_active():
                    raise GuestUnreachable(f"SSH to {self.address} dropped while a command ran")
                elif time.monotonic() > deadline:
                    break
                else:
                    channel.status_event.wait(0.05)
            code = channel.recv_exit_status() if channel.exit_status_ready() else None
        finally:
            channel.close()
        timed_out = code is None or (code in (124, 137) and time.monotonic() - started >= timeout)
        return RawExec(code, bytes(out), bytes(err), timed_out)

    @override
    def put(self, local: Path, remote: str) -> None:
        self._sftp(lambda sftp: sftp.put(str(local), remote), f"{local} -> guest:{remote}")

    @override
    def get(self, remote: str, local: Path) -> None:
        self._sftp(lambda sftp: sftp.get(remote, str(local)), f"guest:{remote} -> {local}")

    def open_sftp(self) -> paramiko.SFTPClient:
        """An SFTP session as this shell's user (its errors are the path's: FileNotFoundError,
        PermissionError); the caller closes it."""
        try:
            return self._connected().open_sftp()
        except (OSError, paramiko.SSHException) as exc:
            raise GuestUnreachable(f"SFTP to {self.address} failed: {exc}") from exc

    def _sftp(self, action, what: str) -> None:
        try:
            with self._connected().open_sftp() as sftp:
                action(sftp)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            raise  # the path is wrong, the guest is fine
        except (OSError, paramiko.SSHException) as exc:
            raise GuestUnreachable(f"copy {what} failed: {exc}") from exc

    @override
    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _within_cap(out: bytearray, err: bytearray, address: str) -> None:
    """Ends the read once a command's output passes MAX_OUTPUT_BYTES (runner.guest.base)."""
    if len(out) + len(err) > MAX_OUTPUT_BYTES:
        raise output_too_large(f"SSH to {address}")

