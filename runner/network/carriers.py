"""How a guest reaches its episode's proxy with `restrict=on` kept: connections the host opens
into the guest ("carriers"), each paired in the guest with one application connection.

QEMU's `guestfwd` cannot carry it here: to a command it is refused by libvirt's seccomp sandbox
(spawn=deny), and to a character device it carries one connection at a time (docs/network.md).
A `hostfwd` can: every episode domain forwards a host port on 127.0.0.1 to GUEST_CARRIER_PORT.
In a networked episode the guest forwarder (guest_forwarder.py, run as root) listens there, and
on 127.0.0.1:GUEST_PROXY_PORT for applications. The host keeps a few carriers open; when one
brings the guest's first bytes, the host opens a connection to the proxy and joins the two.

The guest cannot open anything itself: it only answers connections the host made, and only to
the proxy, which judges every request.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from types import TracebackType

from runner.sockets import close_socket

FORWARDER = Path(__file__).with_name("guest_forwarder.py")  # the guest's end, sent to it as its program
GUEST_CARRIER_PORT = 3129  # in the guest: where the host's carriers arrive (from 10.0.2.2 only)
GUEST_PROXY_PORT = 3128  # in the guest: the proxy's address for its applications (127.0.0.1)
IDLE_CARRIERS = 4
MOST_TUNNELS = 64  # at once; more applications wait in the guest for a carrier
RETRY_S = 0.2  # while the guest forwarder is not listening yet


class Carriers:
    """Keeps IDLE_CARRIERS connections open to the guest (127.0.0.1:CARRIER_PORT on the host),
    joining each that the guest speaks on to a new connection to PROXY."""

    def __init__(self, carrier_port: int, proxy: tuple[str, int], idle: int = IDLE_CARRIERS) -> None:
        self.carrier_port, self.proxy, self.idle = carrier_port, proxy, idle
        self._stop = threading.Event()
        self._idle_now = 0
        self._active = 0
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.joined = 0  # tunnels made so far (what a test waits on)

    def __enter__(self) -> Carriers:
        for _ in range(self.idle):
            self._start_idle()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        with self._lock:
            for s in list(self._sockets):
                close_socket(s)
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)

    def _start_idle(self) -> None:
        with self._lock:
            self._idle_now += 1
            thread = threading.Thread(target=self._serve, name="carrier", daemon=True)
            self._threads.append(thread)
        thread.start()

    def _serve(self) -> None:
        """An idle carrier until the guest speaks on it; then, with another idle carrier started in
        its place (while fewer than MOST_TUNNELS are open), the tunnel; then idle again if the pool
        of idle carriers is short, else done."""
        while not self._stop.is_set():
            carrier = self._open(("127.0.0.1", self.carrier_port))
            first = _first_bytes(carrier) if carrier is not None else b""
            if carrier is None or not first:  # the guest forwarder is not listening (yet), or went away
                if carrier is not None:
                    self._forget(carrier)
                self._stop.wait(RETRY_S)
                continue
            with self._lock:
                self._idle_now -= 1
                self._active += 1
                replace = self._active + self._idle_now < MOST_TUNNELS
            if replace:
                self._start_idle()
            self._carry(carrier, first)
            with self._lock:
                self._active -= 1
                if self._idle_now >= self.idle:
                    return
                self._idle_now += 1

    def _carry(self, carrier: socket.socket, first: bytes) -> None:
        upstream = self._open(self.proxy)
        if upstream is None:
            self._forget(carrier)
            return
        with self._lock:
            self.joined += 1
        back = threading.Thread(target=_pump, args=(upstream, carrier, self), daemon=True)
        back.start()
        try:
            upstream.sendall(first)
            _pump(carrier, upstream, self)
        except OSError:
            self._forget(carrier)
            self._forget(upstream)
        finally:
            back.join()

    def _open(self, address: tuple[str, int]) -> socket.socket | None:
        try:
            s = socket.create_connection(address, timeout=5)
        except OSError:
            return None
        s.settimeout(None)
        with self._lock:
            if self._stop.is_set():
                close_socket(s)
                return None
            self._sockets.add(s)
        return s

    def _forget(self, s: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(s)
        close_socket(s)


def _first_bytes(carrier: socket.socket) -> bytes:
    try:
        return carrier.recv(65536)
    except OSError:
        return b""


def _pump(source: socket.socket, sink: socket.socket, owner: Carriers) -> None:
    """Bytes from SOURCE to SINK until either end closes; then both are closed."""
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        owner._forget(source)
        owner._forget(sink)
