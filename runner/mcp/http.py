"""The MCP server over streamable HTTP on 127.0.0.1, behind a per-episode bearer token.

A request without `Authorization: Bearer <token>` is refused with 401 before it
reaches the MCP layer, so only the agent handed the token can drive the VM.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

import uvicorn
from mcp.server.mcpserver import MCPServer

from runner.errors import InfraError
from runner.sockets import free_port

MCP_PATH = "/mcp"


def bearer_guard(app, token: str):
    """ASGI middleware: HTTP requests must carry the bearer token; lifespan events pass."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            given = dict(scope.get("headers", [])).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                return
        await app(scope, receive, send)

    return guarded


@dataclass
class HttpMcpServer:
    """Serves SERVER on 127.0.0.1:PORT (0: a free one) in a background thread until stop()."""

    server: MCPServer
    port: int = 0
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def __post_init__(self) -> None:
        self.port = self.port or free_port()
        app = bearer_guard(self.server.streamable_http_app(streamable_http_path=MCP_PATH), self.token)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, name="mcp-http", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{MCP_PATH}"

    def start(self, timeout: float = 15.0) -> HttpMcpServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise InfraError(f"the MCP HTTP server did not start on 127.0.0.1:{self.port}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> HttpMcpServer:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
