"""A task's local services: servers the runner starts for an episode and maps a name to, so the
guest reaches them by that name through the proxy (the name leads nowhere else).

A `serve:` service is a folder of the task served read-only over HTTP on 127.0.0.1, a thread of
the runner's: ready once its socket listens, which is before the thread starts.
"""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType


class _QuietFolder(SimpleHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass


class FolderService:
    """FOLDER served over HTTP on 127.0.0.1 under NAME while the block runs."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name, self.folder = name, folder
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietFolder, directory=str(folder)))
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"service-{name}", daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def __enter__(self) -> FolderService:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()
