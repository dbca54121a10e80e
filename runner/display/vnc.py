"""Display over VNC (vncdotool as a library): one persistent connection per VM.

Input always goes over VNC. Capture goes over VNC too, unless a faster local capture
is given (libvirt's screendump: faster and much steadier than a VNC full refresh, see
bench/episode.py); VNC capture stays for endpoints that are only reachable over VNC.
"""

from __future__ import annotations

import io
import threading
import time
import warnings
from collections.abc import Callable

from PIL import Image
from vncdotool import api as vnc_api
from vncdotool.client import VNCDoToolClient, VNCDoToolFactory

from runner.display.base import BUTTONS, Button, Display, DisplayInfo, ScrollDirection
from runner.display.keys import keysym, needs_shift
from runner.errors import GuestUnreachable
from runner.screen import png_size
from typing_extensions import override

_BUTTON_MASK = {"left": 1, "middle": 2, "right": 3}
_WHEEL = {"up": 4, "down": 5, "left": 6, "right": 7}
_SHIFT = 0xFFE1
DEFAULT_TIMEOUT = 20.0
DISCONNECT_TIMEOUT = 2.0
# A click-to-focus window manager moves the focus only after it has seen the click; keys
# sent sooner go to the window focused before. Keys wait this long after a click.
CLICK_SETTLE_S = 0.5
SIZE_TTL = 2.0  # seconds a known screen size is trusted before a capture re-reads it
# QEMU's virtio tablet drops events when its queue is full, and under TCG a guest drains it
# slowly: eight clicks sent in 25 ms lost every press and left a button "held". Nothing
# over VNC says when the guest has caught up, so pointer messages are paced instead.
POINTER_GAP_S = 0.05
# Typed keys are paced for the same reason. QEMU's PS/2 keyboard holds 16 bytes of scancodes
# (a key's press and release take two, four with Shift) and drops what comes past them. A guest
# whose vCPU gets no host CPU for a while drains nothing: on a loaded 2-core host, keys sent
# 11 ms apart lost 16 characters in the middle of a sentence. At this gap a stall of ~400 ms
# still loses nothing, at 20 characters a second, which is faster than a person types.
KEY_GAP_S = 0.05

Capture = Callable[[], bytes]
# VNC's own authentication is DES by the protocol's definition; vncdotool computes it with
# cryptography's TripleDES, which warns on every connection. The warning is the protocol's,
# not ours to fix, and would print once per episode.
warnings.filterwarnings("ignore", message="TripleDES has been moved", category=UserWarning)
# vncdotool starts its Twisted reactor on the first connect if it is not running yet:
# two slots connecting at once would both try. Connects take turns until the handshake
# is done, by which time the reactor runs.
_CONNECT_LOCK = threading.Lock()


class _KeysymClient(VNCDoToolClient):
    """vncdotool's client with a raw keysym event.

    The threaded proxy chains every call on one Deferred whose value must stay the
    protocol, so each method called through it has to return self.
    """

    def keysymEvent(self, keysym: int, down: bool) -> _KeysymClient:
        self.keyEvent(keysym, down=down)
        return self


class _KeysymFactory(VNCDoToolFactory):
    protocol = _KeysymClient


class VncDisplay(Display):
    def __init__(
        self,
        host: str,
        port: int,
        *,
        capture: Capture | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key_delay: float = KEY_GAP_S,
        pointer_offset: int = 0,
        password: str | None = None,
    ) -> None:
        """CAPTURE, when given, returns the screen as PNG bytes faster than VNC can.

        POINTER_OFFSET is added to every coordinate but 0 on the wire: with QEMU's
        absolute tablet a guest may land that many pixels short (see the image manifest).
        """
        self.address = f"{host}::{port}"
        self._password = password
        self._capture = capture
        self._timeout = timeout
        self._key_delay = key_delay
        self._pointer_offset = pointer_offset
        self._lock = threading.RLock()  # vncdotool's proxy has one reply queue: one caller at a time
        self._client: vnc_api.ThreadedVNCClientProxy | None = None
        self._pointer = (0, 0)
        self._clicked_at = 0.0
        self._pointer_sent_at = 0.0
        self._size: DisplayInfo | None = None
        self._size_at = 0.0
        self.input_at = 0.0  # when the last input went out (a capture mirror waits for a frame after it)
        self._connect()

    def use_capture(self, capture: Capture) -> None:
        """Screenshots through CAPTURE from now on (a faster path found after connecting)."""
        self._capture = capture

    # -- connection

    def _connect(self) -> None:
        try:
            with _CONNECT_LOCK:
                self._client = vnc_api.connect(self.address, password=self._password, timeout=self._timeout,
                                               factory_class=_KeysymFactory)
                self._client.pause(0)  # returns once the RFB handshake is done
        except Exception as exc:
            self._client = None
            raise _unreachable(self.address, exc) from exc

    def _call(self, method: str, *args, **kwargs):
        with self._lock:
            if self._client is None:
                self._connect()
            try:
                return getattr(self._client, method)(*args, **kwargs)
            except Exception as exc:
                # A timed-out call leaves a late reply in the proxy's queue: start afresh next time.
                self._drop()
                raise _unreachable(self.address, exc) from exc
            finally:
                if method != "captureScreen":
                    self.input_at = time.monotonic()

    def _pointer_call(self, method: str, *args) -> None:
        """A pointer message, at least POINTER_GAP_S after the one before it."""
        with self._lock:
            gap = self._pointer_sent_at + POINTER_GAP_S - time.monotonic()
            if gap > 0:
                time.sleep(gap)
            try:
                self._call(method, *args)
            finally:
                self._pointer_sent_at = time.monotonic()

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            threading.Thread(target=_quiet_disconnect, args=(client,), daemon=True).start()

    @override
    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            _quiet_disconnect(client)

    # -- screen

    @override
    def info(self) -> DisplayInfo:
        # The size the VNC handshake gave is stale once the guest sets its own mode, and
        # with local capture no VNC frame ever updates it: the latest capture is the truth.
        if self._size is None or time.monotonic() - self._size_at > SIZE_TTL:
            self.screenshot()
        assert self._size is not None
        return self._size

    @override
    def screenshot(self) -> bytes:
        png = self._capture() if self._capture is not None else self.screenshot_vnc()
        self._size = DisplayInfo(*png_size(png))
        self._size_at = time.monotonic()
        return png

    def screenshot_vnc(self) -> bytes:
        """A full-screen refresh over VNC, whatever capture path is the default."""
        buffer = io.BytesIO()
        self._call("captureScreen", buffer, incremental=False, format="PNG")
        return buffer.getvalue()

    # -- pointer

    @property
    @override
    def pointer(self) -> tuple[int, int]:
        return self._pointer

    @override
    def move(self, x: int, y: int) -> None:
        self.check_point(x, y)
        self._pointer_call("mouseMove", *self._wire(x, y))
        self._pointer = (x, y)

    def _wire(self, x: int, y: int) -> tuple[int, int]:
        off = self._pointer_offset
        return (x + off if x else 0), (y + off if y else 0)

    @override
    def click(self, x: int, y: int, button: Button = "left", *, double: bool = False) -> None:
        mask = _button(button)
        self.move(x, y)
        for _ in range(2 if double else 1):
            self._pointer_call("mousePress", mask)
        self._clicked_at = time.monotonic()

    @override
    def drag(self, x1: int, y1: int, x2: int, y2: int, button: Button = "left") -> None:
        mask = _button(button)
        self.check_point(x2, y2)
        self.move(x1, y1)
        self._pointer_call("mouseDown", mask)
        try:
            steps = max(1, min(20, max(abs(x2 - x1), abs(y2 - y1)) // 20))
            for s in range(1, steps + 1):
                self._pointer_call("mouseMove", *self._wire(x1 + (x2 - x1) * s // steps, y1 + (y2 - y1) * s // steps))
        finally:
            self._pointer_call("mouseUp", mask)
        self._pointer = (x2, y2)

    @override
    def scroll(self, x: int, y: int, direction: ScrollDirection, amount: int = 3) -> None:
        if direction not in _WHEEL:
            raise ValueError(f"scroll direction must be one of {', '.join(_WHEEL)}, not {direction!r}")
        if not 1 <= amount <= 50:
            raise ValueError(f"scroll amount must be 1..50, not {amount}")
        self.move(x, y)
        for _ in range(amount):
            self._pointer_call("mousePress", _WHEEL[direction])

    # -- keyboard

    @override
    def key(self, key: str, modifiers: tuple[str, ...] = ()) -> None:
        held = [keysym(m) for m in modifiers]
        code = keysym(key)
        if len(key) == 1 and needs_shift(key) and _SHIFT not in held:
            held.append(_SHIFT)
        self._chord(held, code)

    @override
    def type(self, text: str, *, delay: float | None = None) -> None:
        codes = [(keysym(ch), needs_shift(ch)) for ch in text]  # validate all before sending any
        pause = self._key_delay if delay is None else delay
        for code, shifted in codes:
            self._chord([_SHIFT] if shifted else [], code)
            if pause:
                time.sleep(pause * 2 if shifted else pause)  # Shift's press and release fill the queue too

    def _chord(self, held: list[int], code: int) -> None:
        settle = self._clicked_at + CLICK_SETTLE_S - time.monotonic()
        if settle > 0:
            time.sleep(settle)
        with self._lock:
            for mod in held:
                self._call("keysymEvent", mod, True)
            try:
                self._call("keysymEvent", code, True)
                self._call("keysymEvent", code, False)
            finally:
                for mod in reversed(held):
                    if self._client is not None:
                        self._call("keysymEvent", mod, False)


def png_from_any(mime: str, data: bytes) -> bytes:
    """QEMU's screendump is PNG on 7.2+, PPM before: always hand out PNG."""
    if mime == "image/png" or data[:8] == b"\x89PNG\r\n\x1a\n":
        return data
    buffer = io.BytesIO()
    Image.open(io.BytesIO(data)).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _button(button: str) -> int:
    if button not in BUTTONS:
        raise ValueError(f"button must be one of {', '.join(BUTTONS)}, not {button!r}")
    return _BUTTON_MASK[button]


def _unreachable(address: str, exc: BaseException) -> GuestUnreachable:
    return GuestUnreachable(f"VNC at {address} did not answer: {type(exc).__name__}: {exc}")


def _quiet_disconnect(client) -> None:
    # disconnect() waits for the close to be confirmed, which never comes when QEMU has
    # already gone: bound the wait rather than stall a teardown for the call timeout.
    client.timeout = DISCONNECT_TIMEOUT
    try:
        client.disconnect()
    except Exception:  # noqa: BLE001 - closing is best effort
        pass

