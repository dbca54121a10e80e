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


def start_forwarder(*most_applications: str):
    proxy_port, carrier_port = free_port(), free_port()
    process = subprocess.Popen([sys.executable, str(FORWARDER), "127.0.0.1", str(proxy_port), str(carrier_port),
                                "127.0.0.1", *most_applications], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "listening"
    return process, proxy_port, carrier_port


@pytest.fixture
def forwarder():
    process, proxy_port, carrier_port = start_forwarder()
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


def test_idle_application_connections_hold_no_carrier_so_the_next_request_is_carried(forwarder):
    """A browser's preconnects: connections that send nothing. Four carriers wait idle; twenty
    silent connections take none of them, and the next request is answered at once."""
    proxy_port, carrier_port = forwarder
    with LoopbackHTTP(Echo) as proxy, Carriers(carrier_port, proxy.server.server_address, idle=4) as carriers:
        silent = [socket.create_connection(("127.0.0.1", proxy_port), timeout=30) for _ in range(20)]
        try:
            started = time.monotonic()
            assert ask(proxy_port, "/next").endswith(b"you asked for /next")
            assert time.monotonic() - started < 10  # a starved request waits CARRIER_WAIT_S (30 s), then is cut
            assert carriers.joined == 1
            # A silent connection that speaks at last is carried too.
            silent[0].sendall(b"GET /late HTTP/1.0\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := silent[0].recv(65536):
                answer += chunk
            assert answer.endswith(b"you asked for /late")
        finally:
            for s in silent:
                s.close()


def test_past_the_most_application_connections_the_guests_new_ones_are_closed():
    process, proxy_port, carrier_port = start_forwarder("8")
    try:
        with LoopbackHTTP(Echo) as proxy, Carriers(carrier_port, proxy.server.server_address, idle=2):
            held = [socket.create_connection(("127.0.0.1", proxy_port), timeout=30) for _ in range(8)]
            # The forwarder accepts in order, so the ninth finds eight open.
            with socket.create_connection(("127.0.0.1", proxy_port), timeout=30) as over:
                over.sendall(b"GET /over HTTP/1.0\r\nHost: x\r\n\r\n")
                try:
                    answered = over.recv(65536)
                except ConnectionResetError:  # closed with the request unread
                    answered = b""
                assert answered == b""
            for s in held[:2]:
                s.close()
            deadline = time.monotonic() + 10
            while True:  # the two closed ones are let go as the forwarder reads their end
                try:
                    answer = ask(proxy_port, "/after")
                except ConnectionResetError:  # not yet: still eight open
                    answer = b""
                if answer or time.monotonic() > deadline:
                    break
            assert answer.endswith(b"you asked for /after")
            for s in held[2:]:
                s.close()
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_dormant_forwarder_listens_on_nothing_until_woken_then_carries(tmp_path):
    """The warm state's forwarder (guest_agent/linux/network-warm.sh): loaded, blocked on a FIFO;
    what the episode's start writes there wakes it (network-start.sh)."""
    import os

    fifo = tmp_path / "wake"
    os.mkfifo(fifo, 0o600)
    proxy_port, carrier_port = free_port(), free_port()
    process = subprocess.Popen([sys.executable, str(FORWARDER), "--wake", str(fifo), "127.0.0.1", str(proxy_port),
                                str(carrier_port), "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "dormant"
        for port in (proxy_port, carrier_port):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", port), timeout=5).close()
        fifo.write_text("wake\n")
        assert process.stdout.readline().strip() == "listening"
        with LoopbackHTTP(Echo) as proxy, Carriers(carrier_port, proxy.server.server_address, idle=1):
            assert ask(proxy_port, "/after").endswith(b"you asked for /after")
    finally:
        process.terminate()
        process.wait(timeout=10)
