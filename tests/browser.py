"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

    with Chromium(tmp_path) as browser:
        page = browser.open("http://127.0.0.1:8000/?token=...")
        page.wait_for("document.querySelectorAll('.tile').length == 2")
        page.click(100, 120)

The pipe needs no port and no WebSocket client: Chromium reads commands on fd 3 and writes
answers on fd 4, each a JSON text ended by a NUL byte.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

# What Chromium needs to type a character through CDP: (key, code, virtual key code).
_SPECIAL = {" ": ("Space", 32), "/": ("Slash", 191), "-": ("Minus", 189), ".": ("Period", 190),
            ";": ("Semicolon", 186), "\n": ("Enter", 13)}


class BrowserError(Exception):
    pass


class Chromium:
    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 950) -> None:
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise BrowserError("chromium is missing: scripts/setup-host.sh installs it")
        self._exe = exe
        self._profile = profile_dir
        self._size = (width, height)
        self._next_id = 0
        self._answers: dict[int, dict] = {}
        self._cond = threading.Condition()
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> Chromium:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def place_pipes() -> None:  # in the child: the pipe ends at the fds Chromium reads and writes
            read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._proc = subprocess.Popen(
            [self._exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self._profile}", f"--window-size={self._size[0]},{self._size[1]}",
             "--no-first-run", "--no-default-browser-check", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False, preexec_fn=place_pipes)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        threading.Thread(target=self._read_loop, daemon=True).start()
        return self

    def __exit__(self, *_exc) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._from_chrome, 65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._cond:
                        self._answers[message["id"]] = message
                        self._cond.notify_all()

    def call(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        with self._cond:
            self._next_id += 1
            ident = self._next_id
        message = {"id": ident, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        with self._cond:
            if not self._cond.wait_for(lambda: ident in self._answers, timeout):
                raise BrowserError(f"chromium did not answer {method} within {timeout} s")
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open(self, url: str) -> Page:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session)


class Page:
    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser = browser
        self.session = session

    def eval(self, expression: str):
        result = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                         "awaitPromise": True}, self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails'].get('text')} "
                               f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0):
        """Polls EXPRESSION until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                value = self.eval(expression)
            except BrowserError as exc:  # the page is still loading
                last = exc
                value = None
            if value:
                return value
            time.sleep(0.25)
        raise BrowserError(f"{expression} stayed false for {timeout} s (last error: {last})")

    def click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.browser.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                           "clickCount": 1}, self.session)

    def type(self, text: str) -> None:
        for ch in text:
            if ch in _SPECIAL:
                code, vk = _SPECIAL[ch]
                key = "Enter" if ch == "\n" else ch
            elif ch.isalpha():
                code, vk, key = f"Key{ch.upper()}", ord(ch.upper()), ch
            elif ch.isdigit():
                code, vk, key = f"Digit{ch}", ord(ch), ch
            else:
                raise BrowserError(f"no key for {ch!r} in this driver")
            down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk,
                    "text": "\r" if ch == "\n" else ch}
            self.browser.call("Input.dispatchKeyEvent", down, self.session)
            self.browser.call("Input.dispatchKeyEvent", {"type": "keyUp", "key": key, "code": code,
                                                         "windowsVirtualKeyCode": vk}, self.session)
