"""`cu-run vm up|mcp|check`: one episode VM by hand, served over MCP, or checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from runner.config import Settings
from runner.errors import ExitCode, UsageError
from runner.cli.images import image_build
from runner.cli.options import (
    AccelChoice,
    AccelOpt,
    app,
    CacheDir,
    con,
    err,
    LibvirtUri,
    LiveControlOpt,
    LiveHostOpt,
    LiveOpt,
    LivePortOpt,
    StartChoice,
    StartOpt,
    vm_app,
)
from runner.images.catalog import Catalog


@vm_app.command("up")
def vm_up(
    image: Annotated[str, typer.Option("--image", help="catalog image to boot")] = "linux-test",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON line with the endpoints")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the domain XML and exit")] = False,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Start one episode VM and keep it until Ctrl-C or SIGTERM, then remove it."""
    from runner.runs.session import open_vm, print_dry_run

    settings = Settings.resolve(cache_dir, libvirt_uri)
    view = _live_flags(live, live_port, live_host, live_control)
    if dry_run:
        print(print_dry_run(settings, image, accel), end="")
        return
    with open_vm(settings, image, accel, status=err.status, notice=err.print, start=start) as vm:
        assert vm.endpoints is not None
        if as_json:
            print(json.dumps(vm.endpoints.as_json()), flush=True)
        else:
            e = vm.endpoints
            con.print(f"[green]{e.domain} is up[/] (ready in {sum(vm.timings.phases.values()):.1f} s)\n"
                      f"  screen: vncviewer {e.vnc.replace(':', '::')} (VNC password {e.vnc_password})\n"
                      f"  shell:  {e.how_to_connect()}\n"
                      "Ctrl-C stops and removes it.")
        with _live_vm(vm, "up", view):
            _wait_forever(vm)


@app.command()
def mcp(
    image: Annotated[str, typer.Option("--image", help="catalog image to boot")] = "linux-test",
    tools: Annotated[str, typer.Option("--tools", help="tool sets: screen, mouse, keyboard, files, accessibility")] = (
        "screen,mouse,keyboard"),
    file_root: Annotated[str | None, typer.Option(
        "--file-root", help="folder the file tools are confined to [default: the desktop user's home]")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="refuse tool calls past this many")] = None,
    trajectory: Annotated[Path | None, typer.Option("--trajectory", help="folder for trajectory.jsonl and screenshots")] = None,
    transport: Annotated[str, typer.Option("--transport", help="stdio, or http (127.0.0.1, bearer token)")] = "stdio",
    attach: Annotated[str | None, typer.Option(
        "--attach", help="serve this VNC screen (vnc://HOST:PORT) instead of a fresh VM")] = None,
    password_file: Annotated[Path | None, typer.Option(
        "--password-file", help="--attach: a file holding the VNC password")] = None,
    ssh: Annotated[str | None, typer.Option(
        "--ssh", help="--attach: the guest shell, USER@HOST:PORT, for the file tools")] = None,
    key: Annotated[Path | None, typer.Option("--key", help="--attach --ssh: the private key")] = None,
    host_key: Annotated[str | None, typer.Option("--host-key", help="--attach --ssh: the guest's host key, pinned")] = None,
    guest_agent: Annotated[str | None, typer.Option(
        "--guest-agent", help="--attach --ssh: the guest agent's command, for the accessibility tools")] = None,
    profile: Annotated[str, typer.Option("--profile", help="--attach --ssh: the guest's profile (linux, windows)")] = "linux",
    pointer_offset: Annotated[int, typer.Option(
        "--pointer-offset", help="--attach: pixels the guest's pointer lands short (an image manifest's pointer_offset)")] = 0,
    full_refresh: Annotated[bool, typer.Option(
        "--full-refresh", help="--attach: a full VNC refresh per screenshot instead of the background mirror")] = False,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Start a fresh episode VM and serve its screen, mouse and keyboard over MCP.

    stdio: the VM lives as long as the client stays connected. http: prints one JSON line
    with the URL and bearer token, and serves until Ctrl-C or SIGTERM. Then the VM is removed.
    With --attach: serve a screen cu-run did not start (any VNC endpoint) and start nothing.
    """
    from runner.mcp.session import vm_server
    from runner.mcp.server import resolve_toolsets
    from runner.runs.session import open_vm
    from runner.mcp.trajectory import Trajectory

    toolsets = tuple(t.strip() for t in tools.split(",") if t.strip())
    resolve_toolsets(toolsets)  # refuse a bad --tools before booting anything
    if transport not in ("stdio", "http"):
        raise UsageError(f"--transport must be stdio or http, not {transport!r}")
    view = _live_flags(live, live_port, live_host, live_control)
    if attach is not None and view is not None:
        raise UsageError("--live shows a VM cu-run starts; with --attach, open the screen's own VNC instead")
    if attach is not None:
        _serve_attached(attach, transport, Trajectory(trajectory, max_steps=max_steps), toolsets, password_file,
                        ssh, key, host_key, guest_agent, profile, file_root, pointer_offset, not full_refresh)
        return
    settings = Settings.resolve(cache_dir, libvirt_uri)
    with open_vm(settings, image, accel, status=err.status, notice=err.print, start=start) as vm:
        recorded = Trajectory(trajectory, max_steps=max_steps)
        server = vm_server(vm, recorded, toolsets=toolsets, file_root=file_root)
        with _live_vm(vm, "mcp", view, recorded.path):
            _serve_mcp(server, transport, vm.name, {"domain": vm.name}, wait=lambda: _wait_forever(vm))


def _live_flags(live: bool, port: int, host: str, control: bool):
    """The live view's options, checked before anything starts; None without --live."""
    from runner.live import LiveOptions, check_live_flags

    check_live_flags(live, port, host, control)
    return LiveOptions(port=port, host=host, control=control) if live else None


def _live_vm(vm, phase: str, view, trajectory: Path | None = None):
    """The live view VIEW (from _live_flags) of one VM, or nothing. A person's input goes to
    TRAJECTORY (when there is one) as an intervention."""
    from contextlib import nullcontext

    if view is None:
        return nullcontext()
    from runner.live import serving
    from runner.mcp.trajectory import append_intervention
    from runner.runs.live_sources import SingleVmSource

    on_input = (lambda entry: append_intervention(trajectory, entry)) if trajectory is not None else (lambda _e: None)
    return serving(SingleVmSource(vm, phase, on_input), view,
                   lambda line: err.print(line, soft_wrap=True, markup=False, highlight=False))


def _serve_attached(url, transport, trajectory, toolsets, password_file, ssh, key, host_key, guest_agent, profile,
                    file_root, pointer_offset, fast_capture) -> None:
    from runner.mcp.attach import attached_server, parse_ssh, read_password

    server, closers = attached_server(url, trajectory, toolsets=toolsets, password=read_password(password_file),
                                      ssh=parse_ssh(ssh) if ssh else None, key=key, host_key=host_key,
                                      profile=profile, file_root=(file_root or "/home/cu") if ssh else None,
                                      guest_agent=guest_agent, pointer_offset=pointer_offset,
                                      fast_capture=fast_capture)
    try:
        _serve_mcp(server, transport, url, {"attached": url}, wait=_wait_for_signal)
    finally:
        for closer in closers:
            closer.close()


def _serve_mcp(server, transport: str, what: str, extra: dict, wait) -> None:
    """SERVER on stdio until the client leaves, or on HTTP (one JSON line) until WAIT returns."""
    if transport == "stdio":
        err.print(f"{what} is up; serving MCP on stdio")
        server.run("stdio")
        return
    from runner.mcp.http import HttpMcpServer

    with HttpMcpServer(server) as http:
        print(json.dumps({"url": http.url, "token": http.token, **extra}), flush=True)
        err.print(f"{what} is up; MCP at {http.url} (Authorization: Bearer <token>); Ctrl-C stops")
        wait()


def _wait_for_signal() -> None:
    import time

    while True:  # Ctrl-C or SIGTERM unwinds from here
        time.sleep(1)


def _wait_forever(vm) -> None:
    import time

    while True:
        time.sleep(2)
        vm.check_alive()


@app.command()
def check(
    image: Annotated[str, typer.Option("--image", help="catalog image to check")] = "linux-test",
    out_dir: Annotated[Path, typer.Option("--out", help="where screenshots go")] = Path("cu-run-check"),
    build: Annotated[bool, typer.Option("--build/--no-build", help="build the image first if it is missing")] = True,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Boot an episode VM and prove every seam works on it: shell, files, screen, mouse, keyboard."""
    from runner.vm.selfcheck import run_selfcheck
    from runner.runs.session import open_vm

    settings = Settings.resolve(cache_dir, libvirt_uri)
    if build and Catalog(settings.images_dir).find(image) is None:
        image_build(image, force=False, cache_dir=cache_dir)
    with open_vm(settings, image, accel, status=err.status, notice=err.print, artifacts=out_dir,
                 start=start) as vm:
        con.print(f"{vm.name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in vm.timings.phases.items()))
        with err.status("running the checks"):
            results = run_selfcheck(vm, out_dir)
    table = Table("check", "result", "detail", "s")
    for r in results:
        table.add_row(r.name, "[green]pass[/]" if r.ok else "[bold red]FAIL[/]", r.detail, f"{r.seconds:.1f}")
    con.print(table)
    con.print(f"screenshots in {out_dir}/; the VM and its overlay are gone")
    if not all(r.ok for r in results):
        raise typer.Exit(ExitCode.BAD_INPUT)
