"""What an MCP-driven agent is handed for one episode: a server bound to that episode's VM.

The server speaks streamable HTTP on 127.0.0.1 behind a fresh bearer token, records
every call into the episode's trajectory, and enforces --max-steps. A client config
file in the episode folder tells MCP clients (Claude Code, Codex, anything) how to connect.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from runner.vm.episode import EpisodeVM
from runner.guest.agent import GuestAgent
from runner.mcp.http import HttpMcpServer
from runner.mcp.proxy import ExternalServer, ExternalSession, ProxyLog, RecordingProxy, external_env
from runner.mcp.server import build_server, resolve_toolsets
from runner.mcp.trajectory import RecordingDisplay, RecordingShell, Trajectory

SERVER_NAME = "cu-run"


@dataclass(frozen=True)
class McpSession:
    url: str
    token: str
    config_path: Path  # {"mcpServers": {"cu-run": {"type": "http", "url": ..., "headers": {...}}}}
    tool_names: tuple[str, ...]
    trajectory: Trajectory


@contextmanager
def mcp_session(vm: EpisodeVM, folder: Path, *, toolsets: tuple[str, ...], file_root: str | None,
                max_steps: int | None) -> Iterator[McpSession]:
    trajectory = Trajectory(folder, max_steps=max_steps)
    server = episode_server(vm, trajectory, toolsets=toolsets, file_root=file_root)
    with HttpMcpServer(server) as http:
        yield McpSession(http.url, http.token, _client_config(folder, http), resolve_toolsets(toolsets), trajectory)


@contextmanager
def proxy_session(vm: EpisodeVM, folder: Path, external: ExternalServer, *, max_steps: int | None,
                  rule_kinds: dict[str, str]) -> Iterator[McpSession]:
    """Like mcp_session, with an external MCP server's tools behind cu-run's recording proxy
    (runner.mcp.proxy); the server is started for this episode and stopped with it."""
    trajectory = Trajectory(folder, max_steps=max_steps)
    assert vm.endpoints is not None, "a started VM has its endpoints"
    vnc_host, vnc_port = vm.endpoints.vnc.rsplit(":", 1)
    filled = external.filled(vnc_host, int(vnc_port))
    external_session = ExternalSession(filled, env=external_env(vm.vnc_password), errlog=folder / "mcp-server.log")
    log = ProxyLog(filled.describe(), sorted(external_session.tools))
    try:
        with HttpMcpServer(RecordingProxy(external_session, trajectory, log)) as http:
            yield McpSession(http.url, http.token, _client_config(folder, http), tuple(sorted(external_session.tools)),
                             trajectory)
    finally:
        external_session.close()
        log.write(folder, rule_kinds)


def _client_config(folder: Path, http: HttpMcpServer) -> Path:
    """mcp-config.json: how an MCP client (Claude Code, Codex, ...) reaches the episode's server."""
    config = folder / "mcp-config.json"
    config.write_text(json.dumps({"mcpServers": {SERVER_NAME: {
        "type": "http", "url": http.url, "headers": {"Authorization": f"Bearer {http.token}"}}}}, indent=2))
    config.chmod(0o600)
    return config


def vm_server(vm: EpisodeVM, trajectory: Trajectory, *, toolsets: tuple[str, ...],
              file_root: str | None = None) -> MCPServer:
    """cu-run's tools for one VM outside a run (`cu-run vm mcp`, cu_run's VM.serve_mcp): TOOLSETS
    checked, the files tools rooted at FILE_ROOT or else the desktop user's home."""
    resolve_toolsets(toolsets)
    return episode_server(vm, trajectory, toolsets=toolsets, file_root=file_root or vm.desktop_user.home)


def episode_server(vm: EpisodeVM, trajectory: Trajectory, *, toolsets: tuple[str, ...],
                   file_root: str | None) -> MCPServer:
    """The MCP server over VM's display, shell and guest agent, every call recorded in TRAJECTORY."""
    shell = RecordingShell(vm.shell, trajectory)
    command = vm.image.manifest.guest_agent
    return build_server(RecordingDisplay(vm.display, trajectory), shell, toolsets=toolsets, file_root=file_root,
                        guest=vm.image.manifest.guest,
                        guest_agent=GuestAgent(shell, command, vm.image.manifest.guest.scripts.quote_arguments)
                        if command else None)
