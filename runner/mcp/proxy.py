"""An external MCP server as the agent's tools, behind cu-run's recording proxy.

A study may compare cu-run's own tools with a vendor's computer-use MCP server. The agent
never talks to the external server itself: it talks to this proxy (streamable HTTP on
127.0.0.1 with the episode's bearer token, as for cu-run's own server), which lists the
external server's tools, forwards every call, writes each into the episode's trajectory
(image contents saved as step screenshots), refuses calls past --max-steps, and maps what it
can (typed text, keys, clicks) onto the actions the safety rules read. The external server is
started per episode, with {vnc}, {vnc_host} and {vnc_port} filled in and the episode's VNC
password in CU_RUN_VNC_PASSWORD, and it is stopped with the episode.
"""

from __future__ import annotations

import base64
import math
import json
import os
import shlex
import shutil
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
from mcp import Client, StdioServerParameters
from mcp.client import Transport
from mcp.client.stdio import stdio_client
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent
from typing_extensions import override

from runner import __version__
from runner.display.keys import parse_hotkey
from runner.display.vnc import png_from_any
from runner.errors import InfraError, UsageError
from runner.mcp.trajectory import CURRENT_TOOL, StepLimitReached, Trajectory

PASSWORD_ENV = "CU_RUN_VNC_PASSWORD"
CALL_TIMEOUT_S = 120.0  # one tool call of the external server; past it the call is an error


@dataclass(frozen=True)
class ExternalServer:
    """--mcp-server 'COMMAND ...' (started per episode) or --mcp-server-url URL."""

    command: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if (self.command is None) == (self.url is None):
            raise UsageError("give one of --mcp-server COMMAND and --mcp-server-url URL")
        if self.command is not None and not shlex.split(self.command):
            raise UsageError("--mcp-server is empty")

    def filled(self, vnc_host: str, vnc_port: int) -> ExternalServer:
        def fill(text: str | None) -> str | None:
            if text is None:
                return None
            return (text.replace("{vnc}", f"{vnc_host}:{vnc_port}").replace("{vnc_host}", vnc_host)
                    .replace("{vnc_port}", str(vnc_port)))

        return ExternalServer(fill(self.command), fill(self.url))

    def describe(self) -> str:
        return self.command or self.url or ""

    def preflight(self) -> None:
        """Before any VM starts: the command's executable exists."""
        if self.command is None:
            return
        exe = shlex.split(self.command)[0]
        if not shutil.which(exe) and not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise UsageError(f"--mcp-server: {exe!r} is not an executable on PATH",
                             fix="install the server, or give its full path")


class ExternalSession:
    """A client of the external server in a thread of its own (its own event loop), called
    from the proxy's handlers; closing it stops the server's process."""

    def __init__(self, server: ExternalServer, *, env: dict[str, str], errlog: Path) -> None:
        self._stack = ExitStack()
        try:
            portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
            target: Transport | str
            if server.command is not None:
                argv = shlex.split(server.command)
                log = self._stack.enter_context(errlog.open("a"))
                target = stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], env=env), errlog=log)
            else:
                assert server.url is not None  # one of the two, by __post_init__
                target = server.url
            self.client = self._stack.enter_context(
                portal.wrap_async_context_manager(Client(target, read_timeout_seconds=CALL_TIMEOUT_S)))
            self.portal = portal
            self.tools = {t.name: t for t in portal.call(self.client.list_tools).tools}
        except Exception as exc:
            self._stack.close()
            raise InfraError(f"the external MCP server ({server.describe()}) did not start: "
                             f"{type(exc).__name__}: {exc}; its stderr is in {errlog}") from exc

    def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        return self.portal.call(self.client.call_tool, name, arguments)

    def close(self) -> None:
        self._stack.close()


def map_action(tool: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """What a call of an external tool does, in the actions the safety rules read (type, key,
    click, screenshot), or None when it cannot be told from its name and arguments."""
    name = tool.lower()
    if isinstance(args.get("action"), str):
        # One tool whose `action` says what it does (computer(action="type", text=...), the most
        # common vendor shape): read as the tool that action names.
        action = args["action"].lower()
        return map_action(action, {k: v for k, v in args.items() if k != "action"}) \
            if action != name else None
    if "screenshot" in name or "capture" in name:
        return "screenshot", {}
    text = args.get("text")
    if isinstance(text, str) and any(w in name for w in ("type", "write", "input")):
        return "type", {"text": text}
    combo = next((args[k] for k in ("keys", "key", "combo", "hotkey", "text") if k in args), None)
    if combo is not None and any(w in name for w in ("key", "press", "hotkey")):
        text = "+".join(map(str, combo)) if isinstance(combo, list) else str(combo)
        try:
            key, modifiers = parse_hotkey(text)
        except (UsageError, ValueError):  # parse_hotkey's refusal: the external server's own business
            return None
        return "key", {"key": key, "modifiers": list(modifiers)}
    if "click" in name:
        x, y = args.get("x"), args.get("y")
        if (x is None or y is None) and isinstance(args.get("coordinate"), list) and len(args["coordinate"]) == 2:
            x, y = args["coordinate"]
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(x) and math.isfinite(y):
            named = next((b for b in ("right", "middle") if b in name), "left")  # right_click, middle_click
            return "click", {"x": int(x), "y": int(y), "button": str(args.get("button", named))}
    return None


def _summary(result: CallToolResult) -> str:
    parts = []
    for item in result.content:
        if isinstance(item, TextContent):
            parts.append(item.text[:300])
        elif isinstance(item, ImageContent):
            parts.append(f"image {item.mime_type}")
    return ("error: " if result.is_error else "") + ("; ".join(parts) or "ok")


def _first_image(result: CallToolResult) -> bytes | None:
    for item in result.content:
        if isinstance(item, ImageContent):
            try:
                return png_from_any(item.mime_type, base64.b64decode(item.data))
            except Exception:  # noqa: BLE001 - an image we cannot read is summarized, not saved
                return None
    return None


@dataclass
class ProxyLog:
    """What the proxy could and could not map, written beside the trajectory."""

    server: str
    tools: list[str]
    unmapped_calls: dict[str, int] = field(default_factory=dict)

    def write(self, folder: Path, rule_kinds: dict[str, str]) -> None:
        # A typed/keys/click rule sees only the calls the proxy could map.
        blind = sorted(r for r, kind in rule_kinds.items() if kind in ("typed", "keys", "click_region")) \
            if self.unmapped_calls else []
        (folder / "mcp-proxy.json").write_text(json.dumps(
            {"server": self.server, "tools": self.tools, "unmapped_calls": self.unmapped_calls,
             "rules_not_mapped": blind,
             "note": "safety rules on typed text, keys and clicks cover only the calls the proxy could map"
                     if blind else ""}, indent=2) + "\n")


class RecordingProxy(MCPServer):
    """The agent's MCP server when an external one provides the tools."""

    def __init__(self, external: ExternalSession, trajectory: Trajectory, log: ProxyLog) -> None:
        self.external = external
        self.trajectory = trajectory
        self.proxy_log = log
        super().__init__("cu-run", version=__version__,
                         instructions="The tools of an external computer-use MCP server, for one virtual machine.")

    @override
    async def list_tools(self):
        return list(self.external.tools.values())

    @override
    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        tool = getattr(self, "external", None) and self.external.tools.get(name)
        return tool.input_schema if tool else None

    @override
    async def call_tool(self, name: str, arguments: dict[str, Any], context=None) -> CallToolResult:
        if name not in self.external.tools:
            return _error(f"unknown tool {name!r}")

        mapped = map_action(name, arguments)

        def call() -> CallToolResult:
            if mapped is None:  # counted once the step limit let the call through
                self.proxy_log.unmapped_calls[name] = self.proxy_log.unmapped_calls.get(name, 0) + 1
            return self.external.call(name, arguments)

        def forward() -> CallToolResult:
            CURRENT_TOOL.set(name)
            action, fields = mapped or ("call", {})
            return self.trajectory.record(action, {**arguments, **fields}, call, _summary, screenshot=_first_image)

        try:
            return await anyio.to_thread.run_sync(forward)
        except StepLimitReached as exc:
            return _error(str(exc))
        except Exception as exc:  # noqa: BLE001 - the external server's failure is the agent's tool error
            return _error(f"the external MCP server failed: {type(exc).__name__}: {exc}")


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def external_env(vnc_password: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if vnc_password:
        env[PASSWORD_ENV] = vnc_password
    return env
