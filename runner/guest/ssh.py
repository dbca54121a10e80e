"""GuestShell over SSH (paramiko), trusting only the image's pinned host key."""

from __future__ import annotations

import base64
import errno
import logging
import shlex
import socket
import threading
import time
from pathlib import Path

import paramiko

from runner.errors import CommandTimeout, GuestUnreachable
from runner.guest.base import ExecResult, GuestShell
from typing_extensions import override

# paramiko logs every refused or cut-short handshake at ERROR while a guest boots;
# wait_ready() handles those, and real failures are raised with their cause.
logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)

# Slack the guest-side `timeout` gets before the host gives up on the channel.
_KILL_GRACE = 5.0
# How long output may trail the exit status before the command counts as finished.
_EOF_GRACE = 2.0


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
                try:
                    self._client = self._open(timeout=10.0)
                except Exception as exc:
                    self._client = None
                    raise GuestUnreachable(f"SSH to {self.address} failed: {type(exc).__name__}: {exc}") from exc
            return self._client

    @override
    def wait_ready(self, timeout: float) -> float:
        started = time.monotonic()
        deadline = started + timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                client = self._open(timeout=min(10.0, max(1.0, deadline - time.monotonic())))
            except Exception as exc:
                if not is_transient_ssh_error(exc):
                    raise GuestUnreachable(
                        f"SSH to {self.address} refused for good: {type(exc).__name__}: {exc}",
                        fix="the image's keys do not match the guest: rebuild it with cu-run image build --force",
                    ) from exc
                last = exc
                time.sleep(0.5)
                continue
            with self._lock:
                if self._client is not None:
                    self._client.close()
                self._client = client
            return time.monotonic() - started
        raise GuestUnreachable(
            f"SSH to {self.address} did not answer within {timeout:.0f} s (last: {type(last).__name__}: {last})"
        )

    @override
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        client = self._connected()
        # The guest kills the script at TIMEOUT; the host stops waiting a little later.
        command = f"exec {self._env_prefix}timeout -k 2 {max(1, round(timeout))} sh -s"
        try:
            channel = client.get_transport().open_session(timeout=10)
            channel.exec_command(command)
            channel.sendall(script.encode())
            channel.shutdown_write()
        except Exception as exc:
            raise GuestUnreachable(f"SSH to {self.address} failed to start a command: {exc}") from exc
        out, err = bytearray(), bytearray()
        started = time.monotonic()
        deadline = started + timeout + _KILL_GRACE
        exited_at: float | None = None
        try:
            while True:
                if channel.recv_ready():
                    out += channel.recv(65536)
                elif channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
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
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        # coreutils timeout exits 124 (or 137 after -k) when it had to stop the script;
        # a script that exits 124 by itself early is not a timeout.
        if code is None or (code in (124, 137) and time.monotonic() - started >= timeout):
            raise CommandTimeout(f"command ran past {timeout:.0f} s in the guest and was killed",
                                 stdout=stdout, stderr=stderr)
        return ExecResult(code, stdout, stderr)

    @override
    def put(self, local: Path, remote: str) -> None:
        self._sftp(lambda sftp: sftp.put(str(local), remote), f"{local} -> guest:{remote}")

    @override
    def get(self, remote: str, local: Path) -> None:
        self._sftp(lambda sftp: sftp.get(remote, str(local)), f"guest:{remote} -> {local}")

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
