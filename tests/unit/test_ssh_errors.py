"""The retry predicate of the SSH shell, against tables of transient and permanent errors."""

import errno

import paramiko
import pytest

from runner.guest.ssh import is_transient_ssh_error



class _Key:
    def get_name(self):
        return "ssh-ed25519"

    def get_base64(self):
        return "AAAA"

    def asbytes(self):
        return b"k"

    def get_fingerprint(self):
        return b"f" * 16


TRANSIENT = [
    ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
    ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"),
    paramiko.ssh_exception.NoValidConnectionsError({("127.0.0.1", 2222): ConnectionRefusedError()}),
    paramiko.SSHException("Error reading SSH protocol banner"),
    EOFError(),
    TimeoutError("timed out"),
    OSError(errno.EHOSTUNREACH, "No route to host"),
]

PERMANENT = [
    paramiko.AuthenticationException("Authentication failed."),
    paramiko.BadHostKeyException("[127.0.0.1]:2222", _Key(), _Key()),
    paramiko.SSHException("Server '[127.0.0.1]:2222' not found in known_hosts"),
    OSError(errno.EACCES, "Permission denied"),
    ValueError("not a network error"),
]


@pytest.mark.parametrize("exc", TRANSIENT, ids=lambda e: type(e).__name__ + ":" + str(e)[:30])
def test_transient(exc):
    assert is_transient_ssh_error(exc)


@pytest.mark.parametrize("exc", PERMANENT, ids=lambda e: type(e).__name__ + ":" + str(e)[:30])
def test_permanent(exc):
    assert not is_transient_ssh_error(exc)
