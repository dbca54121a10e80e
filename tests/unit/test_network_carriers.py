"""The carriers on one host: the guest forwarder (run by this host's python3, as a guest's would
run it) and the host's carrier pool, joined to a loopback server standing in for the proxy."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loopback_http import LoopbackHTTP, QuietHandler

from runner.sockets import free_port
from runner.network.carriers import Carriers

FORWARDER = Path(__file__).parents[2] / "runner" / "network" / "guest_forwarder.py"


class Echo(QuietHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.reply(f"you asked for {self.path}".encode())


def wait_joined(carriers: Carriers, count: int, timeout: float) -> bool:
    """Whether CARRIERS joined COUNT tunnels within TIMEOUT."""
    deadline = time.monotonic() + timeout
    while carriers.joined < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return carriers.joined >= count


@pytest.fixture
def forwarder():
    proxy_port, carrier_port = free_port(), free_port()
    process = subprocess.Popen([sys.executable, str(FORWARDER), "127.0.0.1", str(proxy_port), str(carrier_port),
                                "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "listening"
    yield proxy_port, carrier_port
    process.terminate()
    process.wait(timeout=10)


def ask(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        return answer


def test_each_application_connection_gets_its_own_carrier_to_the_proxy(forwarder):
    proxy_port, carrier_port = forwarder
    with LoopbackHTTP(Echo) as proxy, Carriers(carrier_port, proxy.server.server_address, idle=2) as carriers:
        answers = [ask(proxy_port, f"/{n}") for n in range(6)]  # more than the idle pool
        assert all(a.endswith(f"you asked for /{n}".encode()) for n, a in enumerate(answers))
        assert wait_joined(carriers, 6, timeout=5)


def test_many_application_connections_at_once_are_carried(forwarder):
    proxy_port, carrier_port = forwarder
    with LoopbackHTTP(Echo) as proxy, Carriers(carrier_port, proxy.server.server_address, idle=2):
        held = [socket.create_connection(("127.0.0.1", proxy_port), timeout=30) for _ in range(8)]
        try:
            for n, s in enumerate(held):
                s.sendall(f"GET /held-{n} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
            for n, s in enumerate(held):
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
                assert answer.endswith(f"/held-{n}".encode())
        finally:
            for s in held:
                s.close()


def test_a_carrier_from_anywhere_but_the_host_side_is_closed(forwarder):
    _proxy_port, carrier_port = forwarder
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))  # a process in the guest, not the host
        s.settimeout(10)
        s.connect(("127.0.0.1", carrier_port))
        assert s.recv(1) == b"", "the forwarder kept a carrier that did not come from the host side"
