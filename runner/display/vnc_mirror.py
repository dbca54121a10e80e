"""A VNC screen kept current in the background: the fast capture path where libvirt is not there.

A full refresh over VNC asks the server for the whole screen and waits for it (157 ms median
on linux-test, docs/performance.md). The mirror holds a second connection that asks for
incremental updates, one after the other, and keeps the latest frame: the server sends only
what changed, when it changed, and a screenshot is a copy of memory and a PNG encoding.

A frame can be older than an action just sent (the server sends the change at its next
refresh). So a capture asked for after input the mirror has not seen a frame since waits
for the next frame, up to FRESH_WAIT_S: an action that changes nothing costs that wait, an
action that changes the screen costs one refresh. The mirror runs in vncdotool's Twisted
reactor, which the Display's own connection has started.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from collections.abc import Callable

from PIL import Image
from twisted.internet import reactor
from vncdotool.client import VNCDoToolClient, VNCDoToolFactory, factory_connect

from runner.errors import GuestUnreachable

FRESH_WAIT_S = 0.5
CONNECT_TIMEOUT_S = 20.0


class _MirrorClient(VNCDoToolClient):
    def vncConnectionMade(self) -> None:
        super().vncConnectionMade()
        self.framebufferUpdateRequest(incremental=False)

    def commitUpdate(self, rectangles=None) -> None:
        if rectangles and self.screen is not None:
            self.factory.mirror.frame_arrived(self.screen.copy())
        self.framebufferUpdateRequest(incremental=True)  # the next change, whenever it comes


class _MirrorFactory(VNCDoToolFactory):
    protocol = _MirrorClient

    def __init__(self, mirror: VncMirror, password: str | None) -> None:
        super().__init__()
        self.mirror = mirror
        self.password = password
        self.deferred.addErrback(lambda reason: mirror.lost(reason.getErrorMessage()))

    def clientConnectionLost(self, connector, reason) -> None:
        self.mirror.lost(reason.getErrorMessage())
        super().clientConnectionLost(connector, reason)


class VncMirror:
    def __init__(self, host: str, port: int, password: str | None, last_input: Callable[[], float],
                 timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.address = f"{host}::{port}"
        self._last_input = last_input
        self._changed = threading.Condition()
        self._frame: Image.Image | None = None
        self._frame_at = 0.0
        self._gone: str | None = None
        self._factory = _MirrorFactory(self, password)
        reactor.callFromThread(factory_connect, self._factory, host, port, socket.AF_INET)
        with self._changed:
            if not self._changed.wait_for(lambda: self._frame is not None or self._gone, timeout):
                raise GuestUnreachable(f"VNC at {self.address} sent no screen in {timeout:.0f} s")
        if self._frame is None:
            raise GuestUnreachable(f"VNC at {self.address}: {self._gone}")

    # -- called in the reactor thread

    def frame_arrived(self, frame: Image.Image) -> None:
        with self._changed:
            self._frame, self._frame_at = frame, time.monotonic()
            self._changed.notify_all()

    def lost(self, why: str) -> None:
        with self._changed:
            self._gone = why or "the connection was lost"
            self._changed.notify_all()

    # -- called by the Display

    @property
    def alive(self) -> bool:
        return self._gone is None

    def capture(self) -> bytes:
        """The screen as PNG: the latest frame, or the next one when input came after it."""
        with self._changed:
            if self._gone:
                raise GuestUnreachable(f"VNC at {self.address}: the screen mirror stopped: {self._gone}")
            if self._last_input() >= self._frame_at:
                seen = self._frame_at
                self._changed.wait_for(lambda: self._frame_at > seen or self._gone, FRESH_WAIT_S)
            frame = self._frame
        assert frame is not None
        buffer = io.BytesIO()
        frame.save(buffer, format="PNG")
        return buffer.getvalue()

    def close(self) -> None:
        def drop(protocol) -> None:
            protocol.transport.loseConnection()

        reactor.callFromThread(self._factory.deferred.addCallback, drop)
