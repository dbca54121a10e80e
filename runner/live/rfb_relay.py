"""A VNC (RFB 3.8) relay between a browser's noVNC and one VM's VNC server.

The relay, not the browser, logs in to the VM: it answers the VM's password challenge
itself and offers the browser no authentication, so the episode's VNC password never
leaves the run. It then reads every message the browser sends. View-only, it drops the
input messages (keys, pointer, clipboard, resize) before they reach the VM, whatever the
page's own view-only flag says. With control, it forwards them and reports each one, so
the run can record a person's intervention, and it paces them (InputPacer) as the runner's
own display paces an agent's: QEMU's keyboard and tablet drop what comes faster than a
guest under load drains, and a browser sends as fast as it is given.

    relay = RfbRelay(browser, ("127.0.0.1", 5901), password="Ab3...", control=False)
    relay.run()  # until either side closes
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from runner.sockets import close_socket

from runner.display.vnc import CLICK_SETTLE_S, KEY_GAP_S, POINTER_GAP_S
from runner.display.vnc_auth import vnc_auth_response
from runner.errors import InfraError

log = logging.getLogger(__name__)

VERSION = b"RFB 003.008\n"
SECURITY_NONE, SECURITY_VNC = 1, 2

# Client-to-server message types (RFC 6143 and the extensions noVNC speaks).
SET_PIXEL_FORMAT, SET_ENCODINGS, UPDATE_REQUEST, KEY_EVENT, POINTER_EVENT, CUT_TEXT = 0, 2, 3, 4, 5, 6
CONTINUOUS_UPDATES, CLIENT_FENCE, SET_DESKTOP_SIZE, QEMU_MESSAGE = 150, 248, 251, 255
QEMU_EXTENDED_KEY = 0
# A pointer that only moves is reported at most this often: a person's hand makes hundreds a second.
MOVE_REPORT_PERIOD = 0.5
# One key event (a press or a release) at most this often: KEY_GAP_S is the runner's gap per
# typed key, which is a press and a release.
KEY_EVENT_GAP_S = KEY_GAP_S / 2
# Input still queued when the browser leaves goes on to the VM for at most this long.
DRAIN_TIMEOUT_S = 5.0


class BrowserSide(Protocol):
    """The browser's end: a WebSocket carrying the RFB byte stream."""

    def recv(self) -> bytes | None:
        """The next bytes from the browser; None once it has closed."""

    def send(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class RelayClosed(Exception):
    """One side of the relay went away."""


class _Reader:
    """Reads exact byte counts from a source that returns chunks of any size."""

    def __init__(self, recv: Callable[[], bytes | None]) -> None:
        self._recv = recv
        self._buf = bytearray()

    def read(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._recv()
            if chunk is None:
                raise RelayClosed("closed")
            self._buf += chunk
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def rest(self) -> bytes:
        """What was read beyond the last read(): it belongs to whoever reads next."""
        data, self._buf = bytes(self._buf), bytearray()
        return data


def _buttons(message: bytes) -> int:
    return message[1]


class InputPacer:
    """When a person's next input message may go to the VM: key events KEY_EVENT_GAP_S apart,
    pointer messages POINTER_GAP_S apart, and keys CLICK_SETTLE_S after a button changed (a
    click-to-focus window manager moves the focus only once it has seen the click). These are
    the runner's own display's rules (runner.display.vnc), for the same reasons."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._key_at = self._pointer_at = self._click_at = float("-inf")
        self._buttons = 0

    def wait_s(self, kind: int, message: bytes) -> float:
        """How long MESSAGE must wait before it goes; 0 when it may go now."""
        now = self.clock()
        if kind in (KEY_EVENT, QEMU_MESSAGE):
            return max(0.0, self._key_at + KEY_EVENT_GAP_S - now, self._click_at + CLICK_SETTLE_S - now)
        if kind == POINTER_EVENT:
            return max(0.0, self._pointer_at + POINTER_GAP_S - now)
        return 0.0

    def sent(self, kind: int, message: bytes) -> None:
        now = self.clock()
        if kind in (KEY_EVENT, QEMU_MESSAGE):
            self._key_at = now
        elif kind == POINTER_EVENT:
            self._pointer_at = now
            if _buttons(message) != self._buttons:
                self._buttons, self._click_at = _buttons(message), now


class _InputQueue:
    """A person's input on its way to the VM, in order. A pointer message that only moves
    replaces a move still waiting before it: the pointer is absolute, so only where it ends
    matters, and a hand's hundreds of moves a second would otherwise queue up behind the pacing."""

    def __init__(self) -> None:
        self._items: deque[tuple[int, bytes, bool]] = deque()  # kind, message, only moves
        self._buttons = 0  # as of the last pointer message queued
        self._open = True
        self._cond = threading.Condition()

    def put(self, kind: int, message: bytes) -> None:
        with self._cond:
            moves = kind == POINTER_EVENT and _buttons(message) == self._buttons
            if moves and self._items and self._items[-1][0] == POINTER_EVENT and self._items[-1][2]:
                self._items[-1] = (kind, message, True)
            else:
                self._items.append((kind, message, moves))
            if kind == POINTER_EVENT:
                self._buttons = _buttons(message)
            self._cond.notify()

    def peek(self) -> tuple[int, bytes] | None:
        """The next message without taking it (a later move may still replace it); None once
        the queue is closed and empty."""
        with self._cond:
            self._cond.wait_for(lambda: self._items or not self._open)
            return self._items[0][:2] if self._items else None

    def take(self) -> tuple[int, bytes]:
        with self._cond:
            kind, message, _moves = self._items.popleft()
            return kind, message

    def close(self) -> None:
        with self._cond:
            self._open = False
            self._cond.notify_all()


class RfbRelay:
    def __init__(self, browser: BrowserSide, vnc: tuple[str, int], password: str | None, *, control: bool = False,
                 on_input: Callable[[dict], None] = lambda _e: None, timeout: float = 10.0) -> None:
        self.browser = browser
        self.vnc = vnc
        self.password = password
        self.control = control
        self.on_input = on_input
        self.timeout = timeout
        self.dropped = 0  # input messages refused in view-only mode
        self._buttons = 0
        self._last_move_report = 0.0
        self.pacer = InputPacer()
        self._input = _InputQueue()
        self._send_lock = threading.Lock()  # the browser's reader and the input's pacer both send

    def run(self) -> None:
        """Logs in to the VM, greets the browser, then relays until either side closes."""
        server = socket.create_connection(self.vnc, timeout=self.timeout)
        try:
            server_init, early = self._login(server)
            server.settimeout(None)
            browser = _Reader(self.browser.recv)
            self._greet(browser, server_init + early)
            pump = threading.Thread(target=self._server_to_browser, args=(server,), name="rfb-relay-out", daemon=True)
            pump.start()
            pacing = threading.Thread(target=self._paced_input, args=(server,), name="rfb-relay-input", daemon=True)
            pacing.start()
            try:
                self._browser_to_server(browser, server)
            except (RelayClosed, OSError):
                pass
            finally:
                self._input.close()  # what a person already sent still goes: a last Enter counts
                pacing.join(DRAIN_TIMEOUT_S)
        finally:
            close_socket(server)
            self.browser.close()

    # -- the VM's side: we are its client

    def _login(self, server: socket.socket) -> tuple[bytes, bytes]:
        """Logs in; returns the VM's ServerInit and whatever it sent after it in the same read."""
        reader = _Reader(lambda: server.recv(65536) or None)  # b"": the VM closed
        if not reader.read(12).startswith(b"RFB 003."):
            raise InfraError(f"VNC at {self.vnc[0]}:{self.vnc[1]} does not speak RFB 3.x")
        server.sendall(VERSION)
        count = reader.read(1)[0]
        if count == 0:
            (length,) = struct.unpack(">I", reader.read(4))
            raise InfraError(f"VNC refused the connection: {reader.read(length).decode(errors='replace')}")
        offered = reader.read(count)
        if SECURITY_VNC in offered and self.password is not None:
            server.sendall(bytes([SECURITY_VNC]))
            server.sendall(vnc_auth_response(self.password, reader.read(16)))
        elif SECURITY_NONE in offered:
            server.sendall(bytes([SECURITY_NONE]))
        else:
            raise InfraError(f"VNC offers no authentication the relay can answer: {list(offered)}")
        (result,) = struct.unpack(">I", reader.read(4))
        if result != 0:
            raise InfraError("VNC refused the episode's password")
        server.sendall(b"\x01")  # shared: the run's own connection to this screen stays
        head = reader.read(24)  # width, height, pixel format, name length
        (name_length,) = struct.unpack(">I", head[20:24])
        return head + reader.read(name_length), reader.rest()

    # -- the browser's side: we are its server, without a password

    def _greet(self, browser: _Reader, server_init: bytes) -> None:
        self.browser.send(VERSION)
        browser.read(12)
        self.browser.send(bytes([1, SECURITY_NONE]))
        if browser.read(1)[0] != SECURITY_NONE:
            raise RelayClosed("the browser chose an authentication that was not offered")
        self.browser.send(struct.pack(">I", 0))
        browser.read(1)  # ClientInit: whatever it asks, the VM's screen stays shared
        self.browser.send(server_init)

    def _server_to_browser(self, server: socket.socket) -> None:
        try:
            while chunk := server.recv(65536):
                self.browser.send(chunk)
        except OSError:
            pass
        finally:
            self.browser.close()

    def _browser_to_server(self, browser: _Reader, server: socket.socket) -> None:
        while True:
            kind = browser.read(1)[0]
            message, is_input = self._message(kind, browser)
            if is_input and not self.control:
                self.dropped += 1
                continue
            if is_input:
                self._report(kind, message)
                self._input.put(kind, message)
            else:
                # Screen requests overtake queued input: RFB orders neither against the other.
                with self._send_lock:
                    server.sendall(message)

    def _paced_input(self, server: socket.socket) -> None:
        try:
            while (head := self._input.peek()) is not None:
                if (wait := self.pacer.wait_s(*head)) > 0:
                    time.sleep(wait)
                    continue  # a later move may have replaced it meanwhile
                kind, message = self._input.take()
                with self._send_lock:
                    server.sendall(message)
                self.pacer.sent(kind, message)
        except OSError:
            pass

    @staticmethod
    def _message(kind: int, browser: _Reader) -> tuple[bytes, bool]:
        """The whole message that starts with KIND, and whether it is input."""
        head = bytes([kind])
        if kind == SET_PIXEL_FORMAT:
            return head + browser.read(19), False
        if kind == SET_ENCODINGS:
            rest = browser.read(3)
            (count,) = struct.unpack(">H", rest[1:3])
            return head + rest + browser.read(4 * count), False
        if kind == UPDATE_REQUEST:
            return head + browser.read(9), False
        if kind == CONTINUOUS_UPDATES:
            return head + browser.read(9), False
        if kind == CLIENT_FENCE:
            rest = browser.read(8)
            return head + rest + browser.read(rest[7]), False
        if kind == KEY_EVENT:
            return head + browser.read(7), True
        if kind == POINTER_EVENT:
            return head + browser.read(5), True
        if kind == CUT_TEXT:
            rest = browser.read(7)
            # A negative length is the extended clipboard's: that many bytes of it follow.
            (length,) = struct.unpack(">i", rest[3:7])
            return head + rest + browser.read(abs(length)), True
        if kind == SET_DESKTOP_SIZE:
            rest = browser.read(7)
            return head + rest + browser.read(16 * rest[5]), True
        if kind == QEMU_MESSAGE:
            subtype = browser.read(1)
            if subtype[0] == QEMU_EXTENDED_KEY:
                return head + subtype + browser.read(10), True
        # Its length is unknown, so nothing after it could be read safely.
        raise RelayClosed(f"the browser sent a message the relay does not know (type {kind})")

    def _report(self, kind: int, message: bytes) -> None:
        entry: dict | None = None
        if kind == KEY_EVENT:
            down, keysym = message[1], struct.unpack(">I", message[4:8])[0]
            entry = {"input": "key", "keysym": keysym, "down": bool(down)}
        elif kind == QEMU_MESSAGE:
            down, keysym = struct.unpack(">H", message[2:4])[0], struct.unpack(">I", message[4:8])[0]
            entry = {"input": "key", "keysym": keysym, "down": bool(down)}
        elif kind == POINTER_EVENT:
            buttons, x, y = message[1], *struct.unpack(">HH", message[2:6])
            now = time.monotonic()
            if buttons != self._buttons or now - self._last_move_report >= MOVE_REPORT_PERIOD:
                entry = {"input": "pointer", "x": x, "y": y, "buttons": buttons}
                self._buttons, self._last_move_report = buttons, now
        elif kind == CUT_TEXT and struct.unpack(">i", message[4:8])[0] >= 0:
            # (an extended-clipboard message is the client announcing what it can do, not a person)
            entry = {"input": "clipboard", "chars": len(message) - 8}
        elif kind == SET_DESKTOP_SIZE:
            entry = {"input": "resize"}
        if entry is not None:
            try:
                self.on_input(entry)
            except Exception as exc:  # noqa: BLE001 - a bookkeeping failure must not cut a person off
                log.warning("could not record an intervention: %s", exc)

