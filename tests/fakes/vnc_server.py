"""FakeVncServer: the server half of RFB 3.8 with VNC authentication, on loopback, recording
what its client sends. For unit tests of the live view's relay; the real relay to QEMU's VNC
is covered on real VMs in tests/e2e/test_live_view.py."""

from __future__ import annotations

import os
import socket
import struct
import threading

from runner.display.vnc_auth import vnc_auth_response

WIDTH, HEIGHT, NAME = 1280, 800, b"fake-vm"
BELL = b"\x02"  # a server message the relay must pass to the browser untouched
# 32 bits a pixel, depth 24, little-endian, true colour, 8 bits each of red, green, blue
PIXEL_FORMAT = struct.pack(">BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)


class FakeVncServer:
    def __init__(self, password: str) -> None:
        self.password = password
        self.received = bytearray()  # every byte the client sent after its ClientInit
        self.shared: bool | None = None
        self.logins = 0
        self.closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                self._session(conn)
            self.closed.set()

    def _session(self, conn: socket.socket) -> None:
        def read(n: int) -> bytes:
            data = b""
            while len(data) < n:
                chunk = conn.recv(n - len(data))
                if not chunk:
                    raise ConnectionError("client left")
                data += chunk
            return data

        try:
            conn.sendall(b"RFB 003.008\n")
            read(12)
            conn.sendall(bytes([1, 2]))  # one security type: VNC authentication
            if read(1) != b"\x02":
                return
            challenge = os.urandom(16)
            conn.sendall(challenge)
            if read(16) != vnc_auth_response(self.password, challenge):
                conn.sendall(struct.pack(">I", 1))
                return
            conn.sendall(struct.pack(">I", 0))
            self.shared = read(1) == b"\x01"
            self.logins += 1
            conn.sendall(struct.pack(">HH", WIDTH, HEIGHT) + PIXEL_FORMAT + struct.pack(">I", len(NAME)) + NAME + BELL)
            while chunk := conn.recv(65536):
                self.received += chunk
        except (ConnectionError, OSError):
            return

    def close(self) -> None:
        self._listener.close()
