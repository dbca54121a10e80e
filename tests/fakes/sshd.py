"""FakeSshServer: a loopback SSH server (paramiko's server side) for testing SshShell.

It stands in for a guest's sshd at the narrowest seam, the SSH channel, to script
orderings a real guest produces only now and then: sshd may send a command's exit
status before the last of its output, and a background process the script left
behind may hold stdout open long after the script exited. Each exec'd command is
answered by the test's handler, which gets the command line and the script read from
stdin, and returns the steps to send, in order.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from collections.abc import Callable

import paramiko


@dataclass(frozen=True)
class Out:
    data: bytes


@dataclass(frozen=True)
class Exit:
    code: int


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Eof:
    """End of output, then the channel closes."""


@dataclass(frozen=True)
class Reached:
    """Sets EVENT when the server gets to this step, so a test can tell what came first."""
    event: threading.Event


Step = Out | Exit | Pause | Eof | Reached
Handler = Callable[[str, bytes], list[Step]]


class _Server(paramiko.ServerInterface):
    def __init__(self, user: str, client_key: paramiko.PKey) -> None:
        self.user, self.client_key = user, client_key
        self.commands: list[str] = []
        self.exec_ready = threading.Event()

    def check_channel_request(self, kind, chanid):
        return paramiko.OPEN_SUCCEEDED if kind == "session" else paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def get_allowed_auths(self, username):
        return "publickey"

    def check_auth_publickey(self, username, key):
        ok = username == self.user and key.asbytes() == self.client_key.asbytes()
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_exec_request(self, channel, command):
        self.commands.append(command.decode())
        self.exec_ready.set()
        return True


class _KexStallingSocket:
    """A connection whose server sends its banner at once and its key exchange init SECONDS
    later: the client sees a server that answers but is slow to negotiate."""

    def __init__(self, conn: socket.socket, seconds: float) -> None:
        self._conn, self._seconds, self._sends = conn, seconds, 0

    def send(self, data: bytes) -> int:
        self._sends += 1
        if self._sends == 2:  # the first send is the banner, the second the KEXINIT
            time.sleep(self._seconds)
        return self._conn.send(data)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


class FakeSshServer:
    """Serves one connection at a time on 127.0.0.1; `handler` scripts each command."""

    def __init__(self, host_key: paramiko.Ed25519Key, client_key: paramiko.PKey, handler: Handler,
                 user: str = "user", first_kex_stall: float = 0.0) -> None:
        """FIRST_KEX_STALL: seconds the first connection waits before its key exchange starts,
        as a guest just restored under TCG answers its first connection."""
        self.host_key, self.client_key, self.handler, self.user = host_key, client_key, handler, user
        self.first_kex_stall = first_kex_stall
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._transports: list[paramiko.Transport] = []

    def __enter__(self) -> FakeSshServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._listener.close()
        for transport in self._transports:
            transport.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        self.connections += 1
        if self.connections == 1 and self.first_kex_stall:
            conn = _KexStallingSocket(conn, self.first_kex_stall)  # type: ignore[assignment]
        transport = paramiko.Transport(conn)
        self._transports.append(transport)
        transport.add_server_key(self.host_key)
        server = _Server(self.user, self.client_key)
        try:
            transport.start_server(server=server)
        except (paramiko.SSHException, EOFError):
            return  # the client gave up on the negotiation first
        while transport.is_active() and not self._stop.is_set():
            channel = transport.accept(timeout=0.5)
            if channel is not None:
                threading.Thread(target=self._exec, args=(server, channel), daemon=True).start()

    def _exec(self, server: _Server, channel: paramiko.Channel) -> None:
        server.exec_ready.wait(5)
        server.exec_ready.clear()
        command = server.commands[-1]
        script = bytearray()
        while True:  # the client sends the script on stdin, then EOF
            chunk = channel.recv(65536)
            if not chunk:
                break
            script += chunk
        try:
            self._play(channel, command, bytes(script))
        except (OSError, EOFError):
            # The client left first (it timed out, or stopped reading at its output cap): what a
            # real sshd sees as a broken pipe. paramiko says EOFError once the transport is gone.
            pass

    def _play(self, channel: paramiko.Channel, command: str, script: bytes) -> None:
        for step in self.handler(command, script):
            if isinstance(step, Out):
                channel.sendall(step.data)
            elif isinstance(step, Exit):
                channel.send_exit_status(step.code)
            elif isinstance(step, Pause):
                time.sleep(step.seconds)
            elif isinstance(step, Reached):
                step.event.set()
            elif isinstance(step, Eof):
                channel.shutdown_write()
                channel.close()
