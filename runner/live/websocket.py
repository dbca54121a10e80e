"""The browser's WebSocket, through the websockify package, as the relay's BrowserSide."""

from __future__ import annotations

import socket
import threading

from runner.errors import UsageError
from runner.live.rfb_relay import BrowserSide
from typing_extensions import override


def accept_websocket(connection: socket.socket, headers) -> WebSocketSide:
    """Answers the upgrade request whose HEADERS arrived on CONNECTION."""
    try:
        from websockify.websocket import WebSocket
    except ImportError as exc:
        raise UsageError("the live view's full-size screen needs websockify",
                         fix="pip install 'cu-run[live]' (or: scripts/setup-host.sh --extras live)") from exc

    class _Server(WebSocket):
        def select_subprotocol(self, protocols):
            # Older noVNC asks for "binary"; without a protocol asked, none is chosen.
            return "binary" if "binary" in protocols else ""

    ws = _Server()
    ws.accept(connection, headers)
    return WebSocketSide(ws, connection)


class WebSocketSide(BrowserSide):
    def __init__(self, ws, connection: socket.socket) -> None:
        self._ws = ws
        self._connection = connection
        self._send_lock = threading.Lock()  # the relay sends from its pump thread; recv answers pings
        self._closed = False

    @override
    def recv(self) -> bytes | None:
        from websockify.websocket import WebSocketWantReadError

        while True:
            try:
                data = self._ws.recv()
            except WebSocketWantReadError:
                continue  # only part of a frame came: the next call blocks for the rest
            except OSError:
                return None
            return None if data is None else bytes(data)

    @override
    def send(self, data: bytes) -> None:
        from websockify.websocket import WebSocketWantWriteError

        with self._send_lock:
            while True:
                try:
                    self._ws.sendmsg(data)
                    return
                except WebSocketWantWriteError:
                    # The socket took part of a large frame (a full screen is megabytes); the same
                    # call sends the rest, blocking until the browser reads.
                    continue

    @override
    def close(self) -> None:
        with self._send_lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._ws.shutdown(socket.SHUT_RDWR)  # the close frame
            except Exception:  # noqa: BLE001 - already gone
                pass
            try:
                self._connection.shutdown(socket.SHUT_RDWR)  # wakes a recv() blocked on it
            except OSError:
                pass
