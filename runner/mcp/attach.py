"""`cu-run mcp --attach vnc://HOST:PORT`: cu-run's MCP server over a screen it did not start.

Any VNC endpoint will do: a lab machine, a VM started by hand or by `cu-run vm up`, another
tool's sandbox. Screen, mouse and keyboard go over VNC; capture too, as there is no libvirt
here to take a screendump: from a second connection kept current with incremental updates
(runner.display.vnc_mirror), or, with fast_capture off, a full refresh per screenshot. The
file tools need a guest shell, given as SSH with a pinned host key; the accessibility tools
also need the guest agent's command on that guest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from mcp.server.mcpserver import MCPServer

from runner.display.vnc import VncDisplay
from runner.display.vnc_mirror import VncMirror
from runner.errors import UsageError
from runner.guest.agent import GuestAgent
from runner.guest.ssh import SshShell
from runner.mcp.proxy import PASSWORD_ENV
from runner.mcp.server import TOOLSETS, build_server, resolve_toolsets
from runner.mcp.trajectory import RecordingDisplay, RecordingShell, Trajectory
from runner.profiles import get_profile

DEFAULT_VNC_PORT = 5900


@dataclass(frozen=True)
class SshTarget:
    user: str
    host: str
    port: int


def parse_vnc(url: str) -> tuple[str, int]:
    """vnc://HOST:PORT (a TCP port; 5900 when left out) as (host, port)."""
    parts = urlsplit(url if "://" in url else f"vnc://{url}")
    if parts.scheme != "vnc" or not parts.hostname:
        raise UsageError(f"--attach {url!r} is not a VNC address", fix="give vnc://HOST:PORT, e.g. vnc://127.0.0.1:5900")
    try:
        port = parts.port or DEFAULT_VNC_PORT
    except ValueError as exc:
        raise UsageError(f"--attach {url!r} has no valid port", fix="give vnc://HOST:PORT") from exc
    return parts.hostname, port


def parse_ssh(spec: str) -> SshTarget:
    """USER@HOST[:PORT]."""
    user, at, rest = spec.partition("@")
    host, _, port = rest.partition(":")
    if not at or not user or not host or (port and not port.isdigit()):
        raise UsageError(f"--ssh {spec!r} is not USER@HOST:PORT", fix="e.g. --ssh cu@127.0.0.1:2222")
    return SshTarget(user, host, int(port or 22))


def read_password(path: Path | None) -> str | None:
    """The VNC password from a file (never from argv, where every user's `ps` shows it), else
    from CU_RUN_VNC_PASSWORD (what a run hands an external MCP server it starts)."""
    if path is None:
        return os.environ.get(PASSWORD_ENV) or None
    try:
        return path.read_text().strip() or None
    except OSError as exc:
        raise UsageError(f"cannot read the VNC password file {path}: {exc.strerror}") from exc


def attached_server(url: str, trajectory: Trajectory, *, toolsets: tuple[str, ...], password: str | None,
                    ssh: SshTarget | None = None, key: Path | None = None, host_key: str | None = None,
                    profile: str = "linux", file_root: str | None = None,
                    guest_agent: str | None = None, pointer_offset: int = 0,
                    fast_capture: bool = True) -> tuple[MCPServer, list]:
    """The MCP server over the screen at URL (and the guest shell, when given), every call in
    TRAJECTORY; and what to close when it is done."""
    host, port = parse_vnc(url)
    wanted = set(resolve_toolsets(toolsets))
    if wanted & set(TOOLSETS["files"] + TOOLSETS["accessibility"]) and ssh is None:
        raise UsageError("the file and accessibility tools work through the guest's shell, and none is given",
                         fix="add --ssh USER@HOST:PORT --key FILE --host-key 'ssh-ed25519 AAAA...', "
                             "or leave those tool sets out of --tools")
    if wanted & set(TOOLSETS["accessibility"]) and not guest_agent:
        raise UsageError("the accessibility tools need the guest agent's command (--guest-agent)")
    shell = None
    if ssh is not None:
        if key is None or not host_key:
            raise UsageError("--ssh needs --key (the private key) and --host-key (the guest's public host key, "
                             "pinned: 'ssh-ed25519 AAAA...')", fix="ssh-keyscan -t ed25519 HOST gives the host key")
        shell = SshShell(ssh.host, ssh.port, ssh.user, key, host_key)
    elif guest_agent:
        raise UsageError("--guest-agent runs through the guest shell: give --ssh too")
    display = VncDisplay(host, port, password=password, pointer_offset=pointer_offset)
    closers: list = [display]
    if fast_capture:
        mirror = VncMirror(host, port, password, last_input=lambda: display.input_at)
        display.use_capture(mirror.capture)
        closers.append(mirror)
    recorded_shell = RecordingShell(shell, trajectory) if shell is not None else None
    server = build_server(RecordingDisplay(display, trajectory), recorded_shell, toolsets=toolsets,
                          file_root=file_root, guest=get_profile(profile) if shell is not None else None,
                          guest_agent=GuestAgent(recorded_shell, guest_agent, get_profile(profile).scripts.quote_arguments)
                          if recorded_shell and guest_agent else None)
    return server, closers + ([shell] if shell is not None else [])
