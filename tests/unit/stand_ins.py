"""A loopback HTTP server of stand-in files, and of Hugging Face's revision API for its datasets:
the asset store's tests reach nothing outside this machine."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from loopback_http import LoopbackHTTP, QuietHandler

REVISION = "0123456789abcdef0123456789abcdef01234567"
_REVISION_API = re.compile(r"^/api/datasets/[^/]+/[^/]+/revision/main$")


class StandIns(LoopbackHTTP):
    """FILES: a path's bytes, from a dict, or from a function of the path (None: 404)."""

    def __init__(self, files: dict[str, bytes] | Callable[[str], bytes | None]) -> None:
        self.files = files
        self.asked: list[str] = []
        stand_ins = self

        class Handler(QuietHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                stand_ins.asked.append(self.path)
                body = stand_ins.body(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.reply(body)

        super().__init__(Handler)

    def body(self, path: str) -> bytes | None:
        if _REVISION_API.match(path):
            return json.dumps({"sha": REVISION}).encode()
        if callable(self.files):
            return self.files(path)
        return self.files.get(path)
