"""The live view's HTTP server: the tiles page, /api/status, screens, noVNC and its WebSocket.

    with LiveServer(source, port=0) as live:
        print(live.url)  # http://127.0.0.1:P/?token=...

Every request needs the run's token, in the query (?token=) or in the cookie the first
authorised page sets (noVNC's own modules and its WebSocket cannot carry a query); without
it the answer is 401. It listens on 127.0.0.1 unless HOST says otherwise. The full-size
view is noVNC, whose WebSocket the server relays to the slot's VNC on loopback
(runner.live.rfb_relay): view-only unless the server was started with control.
"""

from __future__ import annotations

import hmac
import json
import logging
import mimetypes
import re
import secrets
import threading
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from typing_extensions import override

from runner.errors import UsageError
from runner.live.board import LiveSource, ScreenCache
from runner.live.page import tiles_page, view_page
from runner.live.rfb_relay import RfbRelay

log = logging.getLogger(__name__)

COOKIE = "cu_run_live"
NOVNC_DIRS = (Path("/usr/share/novnc"), Path("/usr/share/webapps/novnc"))


def find_novnc() -> Path | None:
    """noVNC's files (Debian's novnc package), or None."""
    return next((d for d in NOVNC_DIRS if (d / "core" / "rfb.js").is_file()), None)


class LiveServer:
    def __init__(self, source: LiveSource, *, host: str = "127.0.0.1", port: int = 0, control: bool = False,
                 run_dir: Path | None = None) -> None:
        """RUN_DIR: the run's folder, whose report (rendered on request) and recordings the page links."""
        self.source = source
        self.control = control
        self.run_dir = run_dir
        self.token = secrets.token_urlsafe(24)
        self.screens = ScreenCache(source)
        self.novnc = find_novnc()
        handler = type("Handler", (_Handler,), {"live": self})
        try:
            self._http = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise UsageError(f"the live view cannot listen on {host}:{port}: {exc.strerror}",
                             fix="choose another --live-port, or 0 for any free one") from exc
        self._http.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def url(self) -> str:
        host = str(self._http.server_address[0])
        return f"http://{host}:{self.port}/?token={self.token}"

    def start(self) -> LiveServer:
        self._thread = threading.Thread(target=self._http.serve_forever, name="live-view", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.close()

    def status(self) -> dict:
        done, total = self.source.progress()
        return {"slots": [s.as_json() for s in self.source.slots()], "done": done, "total": total,
                "finished": [f.as_json() for f in self.source.finished()], "control": self.control}


class _Handler(BaseHTTPRequestHandler):
    live: LiveServer
    server_version = "cu-run-live"

    @override
    def log_message(self, format, *args) -> None:
        log.debug("live: " + format, *args)

    def do_GET(self) -> None:  # the base class's name
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        from_query = query.get("token", [""])[0]
        if not (self._token_ok(from_query) or self._token_ok(self._cookie())):
            self._send(HTTPStatus.UNAUTHORIZED, b"this live view needs its token: open the URL the run printed\n",
                       "text/plain")
            return
        try:
            self._route(url.path, query, set_cookie=bool(from_query))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _route(self, path: str, query: dict, set_cookie: bool) -> None:
        live = self.live
        cookie = {"Set-Cookie": f"{COOKIE}={live.token}; HttpOnly; SameSite=Strict; Path=/"} if set_cookie else {}
        if path == "/":
            self._send(HTTPStatus.OK, tiles_page(live.source.title, live.control).encode(), "text/html", cookie)
        elif path == "/api/status":
            self._send(HTTPStatus.OK, json.dumps(live.status()).encode(), "application/json")
        elif m := re.fullmatch(r"/api/screen/(\d+)\.png", path):
            png = live.screens.get(int(m.group(1)))
            if png is None:
                self._send(HTTPStatus.NOT_FOUND, b"no VM on this slot now\n", "text/plain")
            else:
                self._send(HTTPStatus.OK, png, "image/png", {"Cache-Control": "no-store"})
        elif m := re.fullmatch(r"/view/(\d+)", path):
            if live.novnc is None:
                self._send(HTTPStatus.NOT_FOUND, b"noVNC is not installed: scripts/setup-host.sh installs it "
                                                 b"(Debian's novnc package)\n", "text/plain")
            else:
                self._send(HTTPStatus.OK, view_page(int(m.group(1)), live.control).encode(), "text/html", cookie)
        elif m := re.fullmatch(r"/ws/(\d+)", path):
            self._websocket(int(m.group(1)))
        elif path.startswith("/novnc/") and live.novnc is not None:
            self._file(live.novnc, path.removeprefix("/novnc/"))
        elif path == "/run/report.html" and live.run_dir is not None:
            from runner.records.report import render_report

            self._send(HTTPStatus.OK, render_report(live.run_dir).encode(), "text/html")
        elif path.startswith("/run/") and live.run_dir is not None:
            self._file(live.run_dir, path.removeprefix("/run/"), allowed=(".mp4", ".png"))
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    # -- pieces

    def _token_ok(self, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.live.token.encode())

    def _cookie(self) -> str:
        jar = SimpleCookie(self.headers.get("Cookie", ""))
        return jar[COOKIE].value if COOKIE in jar else ""

    def _send(self, status: HTTPStatus, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _file(self, root: Path, relative: str, allowed: tuple[str, ...] | None = None) -> None:
        """A file under ROOT, never one outside it."""
        path = (root / relative).resolve()
        if (not path.is_relative_to(root.resolve()) or not path.is_file()
                or (allowed is not None and path.suffix not in allowed)):
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")
            return
        kind = "text/javascript" if path.suffix == ".js" else mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, path.read_bytes(), kind)

    def _websocket(self, slot: int) -> None:
        target = self.live.source.vnc(slot)
        if target is None:
            self._send(HTTPStatus.NOT_FOUND, b"no VM on this slot now\n", "text/plain")
            return
        from runner.live.websocket import accept_websocket

        try:
            browser = accept_websocket(self.connection, self.headers)
        except UsageError as exc:  # websockify is not installed
            self._send(HTTPStatus.NOT_IMPLEMENTED, f"{exc.message}; {exc.fix}\n".encode(), "text/plain")
            return
        except Exception as exc:  # noqa: BLE001 - not a WebSocket request
            self._send(HTTPStatus.BAD_REQUEST, f"not a WebSocket upgrade: {exc}\n".encode(), "text/plain")
            return
        self.close_connection = True
        relay = RfbRelay(browser, (target.host, target.port), target.password, control=self.live.control,
                         on_input=target.on_input)
        try:
            relay.run()
        except Exception as exc:  # noqa: BLE001 - one viewer's failure is said, the run goes on
            log.warning("live view of slot %d: %s", slot, exc)
