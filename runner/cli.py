"""The `cu-run` command line. Commands are thin: options -> settings -> one function."""

from __future__ import annotations

import json
import logging
import sys
from enum import StrEnum
from pathlib import Path
from collections.abc import Callable
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from runner import __version__
from runner.images.catalog import Catalog
from runner.config import Settings
from runner.console import make_console
from runner.errors import CuRunError, InfraError, UsageError

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  help="Run computer-use agents on local VMs, many at once, and score them.")
image_app = typer.Typer(no_args_is_help=True, help="Build and list golden images.")
tasks_app = typer.Typer(no_args_is_help=True, help="List, show and lint task suites.")
vm_app = typer.Typer(no_args_is_help=True, help="Start episode VMs by hand.")
export_app = typer.Typer(no_args_is_help=True, help="Write a run in another tool's format.")
study_app = typer.Typer(no_args_is_help=True, help="Studies: arms of agents and MCP servers on one task list.")
host_app = typer.Typer(no_args_is_help=True, help="Make this machine a cu-run host of a Ray cluster.")
cluster_app = typer.Typer(no_args_is_help=True, help="Ray clusters of cu-run hosts: try one locally, see its hosts.")
app.add_typer(image_app, name="image")
app.add_typer(vm_app, name="vm")
app.add_typer(tasks_app, name="tasks")
app.add_typer(export_app, name="export")
app.add_typer(study_app, name="study")
app.add_typer(host_app, name="host")
app.add_typer(cluster_app, name="cluster")

con = make_console()
err = make_console(stderr=True)

CacheDir = Annotated[Path | None, typer.Option("--cache-dir", envvar="CU_RUN_HOME",
                                                  help="Image catalog and episode files [default: ~/.cache/cu-run]")]
LibvirtUri = Annotated[str | None, typer.Option("--libvirt-uri", envvar="CU_RUN_LIBVIRT_URI",
                                                   help="libvirt connection [default: qemu:///system]")]
class AccelChoice(StrEnum):
    auto = "auto"
    kvm = "kvm"
    tcg = "tcg"


class StartChoice(StrEnum):
    auto = "auto"
    warm = "warm"
    cold = "cold"


class AgentChoice(StrEnum):
    oracle = "oracle"
    nop = "nop"
    scripted = "scripted"
    command = "command"
    claude = "claude"
    codex = "codex"


class GateChoice(StrEnum):
    all = "all"
    stable = "stable"


# Choices are enums: a misspelt value fails at parse time, naming the flag, before any work.
AccelOpt = Annotated[AccelChoice, typer.Option("--accel", help="auto (probe), kvm or tcg")]
StartOpt = Annotated[StartChoice, typer.Option("--start", help="warm (restore a saved state), cold (boot), or auto: "
                                                     "warm when every slot has a valid state")]


@app.command()
def version() -> None:
    """Print cu-run's version."""
    con.print(__version__)


@image_app.command("build")
def image_build(
    name: Annotated[str, typer.Argument(help="built-in image to build: linux-test or windows-11")],
    force: Annotated[bool, typer.Option("--force", help="rebuild even if the catalog has it")] = False,
    iso: Annotated[Path | None, typer.Option("--iso", help="windows-11: the Windows 11 ISO")] = None,
    virtio_iso: Annotated[Path | None, typer.Option("--virtio-iso", help="windows-11: the virtio-win ISO")] = None,
    python_installer: Annotated[Path | None, typer.Option(
        "--python-installer", help="windows-11: python-3.13.x-amd64.exe")] = None,
    evals_seed: Annotated[Path | None, typer.Option("--evals-seed", help="windows-11: files for C:\\evals")] = None,
    iso_sha256: Annotated[str | None, typer.Option("--iso-sha256", help="windows-11: expected sha256 of --iso")] = None,
    virtio_sha256: Annotated[str | None, typer.Option("--virtio-sha256")] = None,
    python_sha256: Annotated[str | None, typer.Option("--python-sha256")] = None,
    licence_days: Annotated[int, typer.Option("--licence-days", help="windows-11: evaluation licence length; 0: none")] = 90,
    accel: AccelOpt = AccelChoice.auto,
    cache_dir: CacheDir = None,
) -> None:
    """Build a golden image into the catalog (reused when already built)."""
    settings = Settings.resolve(cache_dir)
    catalog = Catalog(settings.images_dir)
    if name == "windows-11":
        _build_windows(catalog, name, force, iso, virtio_iso, python_installer, evals_seed, iso_sha256,
                       virtio_sha256, python_sha256, licence_days, accel, settings)
        return
    from runner.images.linux_test import build_image

    with err.status(f"building {name}") as status:
        image, built = build_image(catalog, name, force=force,
                                   progress=lambda line: status.update(f"building {name}: {line}"))
    m = image.manifest
    verb = f"built in {m.build_seconds:.0f} s" if built else "already built (use --force to rebuild)"
    con.print(f"{m.name}: {verb}\n  disk {image.disk} ({m.disk_bytes / 2**20:.0f} MiB, sha256 {m.disk_sha256[:16]}...)")


def _build_windows(catalog, name, force, iso, virtio_iso, python_installer, evals_seed, iso_sha256, virtio_sha256,
                   python_sha256, licence_days, accel, settings) -> None:
    from runner.images.windows_11 import DEFAULT_SEED, WindowsInputs, build_windows_image

    missing = [flag for flag, value in (("--iso", iso), ("--virtio-iso", virtio_iso),
                                        ("--python-installer", python_installer)) if value is None]
    if missing:
        raise UsageError(f"building windows-11 needs {', '.join(missing)}",
                         fix="docs/windows.md says where each file comes from")
    existing = catalog.find(name)
    if existing is not None and not force:
        con.print(f"{name}: already built (use --force to rebuild)")
        return
    chosen = accel
    if accel == "auto":
        from runner.session import resolve_accel

        chosen, _probe = resolve_accel(settings, None, "auto")
        if chosen == "tcg":
            err.print("[yellow]KVM is not usable here: Windows setup under TCG takes many hours[/]")
    inputs = WindowsInputs(iso=iso, virtio_iso=virtio_iso, python_installer=python_installer,
                           evals_seed=evals_seed or DEFAULT_SEED, iso_sha256=iso_sha256, virtio_sha256=virtio_sha256,
                           python_sha256=python_sha256, licence_days=licence_days, accel=chosen)
    with err.status(f"building {name}") as status:
        image = build_windows_image(catalog, name, inputs, progress=_status_and_log(status, err, f"building {name}"))
    m = image.manifest
    con.print(f"{m.name}: built in {m.build_seconds / 60:.0f} min\n  disk {image.disk} "
              f"({m.disk_bytes / 2**30:.1f} GiB, sha256 {m.disk_sha256[:16]}...), licence until {m.licence_expires}")


@image_app.command("list")
def image_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON array of manifests")] = False,
    cache_dir: CacheDir = None,
) -> None:
    """Show the image catalog and each image's warm states."""
    from runner.images.warm_state import list_slots

    settings = Settings.resolve(cache_dir)
    images = Catalog(settings.images_dir).images()
    if as_json:
        print(json.dumps([{**i.manifest.model_dump(mode="json", exclude={"packages"}),
                           "packages": len(i.manifest.packages), "folder": str(i.folder),
                           "warm": [{**s.state.model_dump(mode="json"), "folder": str(s.folder), "bytes": s.bytes}
                                    for s in list_slots(i)]} for i in images], indent=2))
        return
    if not images:
        con.print(f"no images in {settings.images_dir}; build one: cu-run image build linux-test")
        return
    table = Table("name", "profile", "disk", "screen", "built", "sha256", "warm slots")
    for i in images:
        m = i.manifest
        warm = list_slots(i)
        table.add_row(m.name, m.profile, f"{m.disk_bytes / 2**20:.0f} MiB", f"{m.screen.width}x{m.screen.height}",
                      m.built_at.strftime("%Y-%m-%d %H:%M"), m.disk_sha256[:16],
                      f"{len(warm)} ({sum(s.bytes for s in warm) / 2**20:.0f} MiB, {warm[0].state.deps.accel})"
                      if warm else "none")
    con.print(table)


@image_app.command("warm")
def image_warm(
    name: Annotated[str, typer.Argument(help="catalog image to warm, e.g. linux-test")],
    slots: Annotated[int, typer.Option("--slots", help="warm states to make: one per pool slot")] = 1,
    force: Annotated[bool, typer.Option("--force", help="re-make states that are still current")] = False,
    remove: Annotated[bool, typer.Option("--remove", help="delete the image's warm states instead")] = False,
    accel: AccelOpt = AccelChoice.auto,
    cluster: ClusterOpt = None,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Boot each slot once and save its RAM state, so episodes restore in seconds instead of booting.

    Resumable: slots whose state is current are kept; an interrupted slot leaves nothing behind.
    With --cluster: on every host of the cluster, for all of its slots, sending the image first
    where it is missing.
    """
    from runner.hypervisor.libvirt_host import LibvirtHost
    from runner.session import resolve_accel
    from runner.images.warm_state import remove_warm
    from runner.images.warming import warm_image

    settings = Settings.resolve(cache_dir, libvirt_uri)
    image = Catalog(settings.images_dir).get(name)
    if cluster:
        from runner.cluster.driver import warm_on_cluster

        image.verify_disk()
        warm_on_cluster(image, cluster, accel, force, err)
        return
    if remove:
        removed = remove_warm(image)
        con.print("\n".join(f"removed {r}" for r in removed) or f"{name} has no warm states")
        return
    chosen, _probe = resolve_accel(settings, image, accel)
    host = LibvirtHost(settings.libvirt_uri)
    try:
        with err.status(f"warming {name}") as status:
            done = warm_image(host, settings, image, slots, chosen, force=force,
                              progress=_status_and_log(status, err, f"warming {name}"))
    finally:
        host.close()
    total = sum(s.bytes for s in done)
    con.print(f"{name}: {len(done)} warm slots, {total / 2**20:.0f} MiB in {done[0].folder.parent}")


@app.command()
def doctor(cache_dir: CacheDir = None, libvirt_uri: LibvirtUri = None) -> None:
    """Check that this host can run episodes; say how to fix what is missing."""
    from runner.doctor import run_checks

    settings = Settings.resolve(cache_dir, libvirt_uri)
    with err.status("checking (the KVM probe boots a kernel; up to ~12 s)"):
        checks = run_checks(settings)
    table = Table("check", "status", "detail", "fix")
    style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
    for c in checks:
        table.add_row(c.name, f"[{style[c.status]}]{c.status}[/]", c.detail, c.fix)
    con.print(table)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(1)


@app.command()
def gc(
    everything: Annotated[bool, typer.Option("--all", help="also remove VMs of runs still alive")] = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Remove the domains and overlays that crashed or killed runs left behind."""
    from runner.gc import collect_garbage
    from runner.hypervisor.libvirt_host import LibvirtHost

    settings = Settings.resolve(cache_dir, libvirt_uri)
    host = LibvirtHost(settings.libvirt_uri)
    try:
        report = collect_garbage(host, settings, everything=everything)
    finally:
        host.close()
    for line in report.removed:
        con.print(f"removed {line}")
    for line in report.kept:
        con.print(f"[dim]kept {line}[/]")
    for line in report.failed:
        err.print(f"[red]could not remove {line}[/]")
    if not report.removed:
        con.print("nothing to remove")
    if report.failed:
        raise typer.Exit(3)


LiveOpt = Annotated[bool, typer.Option("--live", help="serve a live view of the VMs' screens; prints its URL (docs/live.md)")]
LivePortOpt = Annotated[int, typer.Option("--live-port", help="the live view's port [default: any free one]")]
LiveHostOpt = Annotated[str, typer.Option("--live-host",
                                           help="the live view's address; beyond loopback, read docs/live.md first")]
LiveControlOpt = Annotated[bool, typer.Option(
    "--live-control", help="the live view may take the mouse and keyboard; every input is recorded as an intervention")]
SelectionOpt = Annotated[Path | None, typer.Option(
    "--selection", help="a selection.yaml of `tasks select`: its tasks; refused if the suite changed since")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", help="a Ray cluster's HOST:PORT: run on its cu-run hosts (token: RAY_AUTH_TOKEN_PATH)")]


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
    from runner.session import open_vm, print_dry_run

    settings = Settings.resolve(cache_dir, libvirt_uri)
    from runner.live import check_live_flags

    check_live_flags(live, live_port, live_host, live_control)
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
        with _live_vm(vm, "up", live, live_port, live_host, live_control):
            _wait_forever(vm)


@app.command()
def mcp(
    image: Annotated[str, typer.Option("--image", help="catalog image to boot")] = "linux-test",
    tools: Annotated[str, typer.Option("--tools", help="tool sets: screen, mouse, keyboard, files, accessibility")] = (
        "screen,mouse,keyboard"),
    file_root: Annotated[str, typer.Option("--file-root", help="folder the file tools are confined to")] = "/home/cu",
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
    from runner.mcp.session import episode_server
    from runner.mcp.server import resolve_toolsets
    from runner.session import open_vm
    from runner.mcp.trajectory import Trajectory

    toolsets = tuple(t.strip() for t in tools.split(",") if t.strip())
    resolve_toolsets(toolsets)  # refuse a bad --tools before booting anything
    if transport not in ("stdio", "http"):
        raise UsageError(f"--transport must be stdio or http, not {transport!r}")
    from runner.live import check_live_flags

    check_live_flags(live, live_port, live_host, live_control)
    if attach is not None and live:
        raise UsageError("--live shows a VM cu-run starts; with --attach, open the screen's own VNC instead")
    if attach is not None:
        _serve_attached(attach, transport, Trajectory(trajectory, max_steps=max_steps), toolsets, password_file,
                        ssh, key, host_key, guest_agent, profile, file_root, pointer_offset, not full_refresh)
        return
    settings = Settings.resolve(cache_dir, libvirt_uri)
    with open_vm(settings, image, accel, status=err.status, notice=err.print, start=start) as vm:
        recorded = Trajectory(trajectory, max_steps=max_steps)
        server = episode_server(vm, recorded, toolsets=toolsets, file_root=file_root)
        with _live_vm(vm, "mcp", live, live_port, live_host, live_control, recorded.path):
            _serve_mcp(server, transport, vm.name, {"domain": vm.name}, wait=lambda: _wait_forever(vm))


def _live_vm(vm, phase: str, live: bool, port: int, host: str, control: bool, trajectory: Path | None = None):
    """The live view of one VM (vm up --live, mcp --live), or nothing. A person's input goes to
    TRAJECTORY (when there is one) as an intervention."""
    from contextlib import nullcontext

    if not live:
        return nullcontext()
    from runner.live import LiveOptions, serving
    from runner.live.sources import SingleVmSource
    from runner.mcp.trajectory import append_intervention

    on_input = (lambda entry: append_intervention(trajectory, entry)) if trajectory is not None else (lambda _e: None)
    return serving(SingleVmSource(vm, phase, on_input), LiveOptions(port=port, host=host, control=control),
                   lambda line: err.print(line, soft_wrap=True, markup=False, highlight=False))


def _serve_attached(url, transport, trajectory, toolsets, password_file, ssh, key, host_key, guest_agent, profile,
                    file_root, pointer_offset, fast_capture) -> None:
    from runner.mcp.attach import attached_server, parse_ssh, read_password

    server, closers = attached_server(url, trajectory, toolsets=toolsets, password=read_password(password_file),
                                      ssh=parse_ssh(ssh) if ssh else None, key=key, host_key=host_key,
                                      profile=profile, file_root=file_root if ssh else None,
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
    from runner.net import free_port
    from runner.mcp.http import HttpMcpServer

    with HttpMcpServer(server, free_port()) as http:
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
    from runner.selfcheck import run_selfcheck
    from runner.session import open_vm

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
        raise typer.Exit(1)


SuiteOpt = Annotated[str, typer.Option("--suite", help="built-in suite name (tasks/NAME) or a suite folder")]
TasksOpt = Annotated[str | None, typer.Option("--tasks", help="comma-separated task ids [default: all]")]
PoolOpt = Annotated[int, typer.Option("--vm-pool", min=1, help="episodes at once (one VM each)")]
TrialsOpt = Annotated[int, typer.Option("--trials", min=1, help="episodes per task")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="run folder [default: runs/<suite>-<agent>-<time>]")]
RecordOpt = Annotated[bool, typer.Option("--record", help="each episode's screen to recording.mp4 (H.264, 2 fps)")]
ImageOpt = Annotated[str | None, typer.Option("--image", help="catalog image [default: by the suite's profile]")]


def _comma_list(text: str | None) -> tuple[str, ...]:
    """--tasks a,b / --tools screen,mouse: the names, blanks dropped."""
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())


@app.command()
def run(
    suite: SuiteOpt,
    agent: Annotated[AgentChoice, typer.Option("--agent", help="who acts on the VM")],
    tasks: TasksOpt = None,
    vm_pool: PoolOpt = 1,
    trials: TrialsOpt = 1,
    out: OutOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="finish the run in --out, redoing nothing finished")] = False,
    fail_under: Annotated[float | None, typer.Option("--fail-under", help="exit 4 if the success rate is lower")] = None,
    image: ImageOpt = None,
    tools: Annotated[str, typer.Option("--tools", help="MCP tool sets the agent may use")] = "screen,mouse,keyboard",
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="tool calls per episode; then timeout")] = None,
    agent_cmd: Annotated[str | None, typer.Option("--agent-cmd", help="the executable for --agent command")] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", help="model turns for claude and codex")] = 50,
    agent_script: Annotated[str, typer.Option(
        "--agent-script", help="the scripted agent's script file in each task")] = "ui_oracle.yaml",
    record: RecordOpt = False,
    gate: Annotated[GateChoice, typer.Option(
        "--gate", help="--fail-under over all tasks, or stable: flaky tasks left out")] = GateChoice.all,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    cluster: ClusterOpt = None,
    selection: SelectionOpt = None,
    mcp_server: Annotated[str | None, typer.Option(
        "--mcp-server", help="an external MCP server's command, per episode ({vnc}, {vnc_host}, {vnc_port} filled in), "
                             "instead of cu-run's tools")] = None,
    mcp_server_url: Annotated[str | None, typer.Option("--mcp-server-url", help="an external MCP server's URL")] = None,
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Run an agent over a suite on a pool of VMs; results, artifacts and a summary go to --out."""
    from runner.runs.run import run_suite

    from runner.runs.run import RunRequest

    request = RunRequest(suite=suite, agent=agent, tasks=_comma_list(tasks), vm_pool=vm_pool, trials=trials, out=out,
                         resume=resume, fail_under=fail_under, image=image, accel=accel, tools=_comma_list(tools),
                         max_steps=max_steps, agent_cmd=agent_cmd, max_turns=max_turns, start=start, gate=gate,
                         agent_script=agent_script, record=record, cluster=cluster, selection=selection,
                         mcp_server=mcp_server, mcp_server_url=mcp_server_url, live=live, live_port=live_port,
                         live_host=live_host, live_control=live_control)
    result = run_suite(Settings.resolve(cache_dir, libvirt_uri), request, err)
    con.print(f"results in {result.out_dir}")
    raise typer.Exit(result.exit_code)


@app.command()
def validate(
    suite: SuiteOpt,
    tasks: TasksOpt = None,
    vm_pool: PoolOpt = 1,
    trials: TrialsOpt = 1,
    out: OutOpt = None,
    image: ImageOpt = None,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    record: RecordOpt = False,
    cluster: ClusterOpt = None,
    selection: SelectionOpt = None,
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Prove a suite sound: the oracle must pass every task and the nop agent fail every one."""
    from runner.runs.run import RunRequest, validate_suite

    request = RunRequest(suite=suite, agent=AgentChoice.oracle, tasks=_comma_list(tasks), vm_pool=vm_pool,
                         trials=trials, out=out, image=image, accel=accel, start=start, record=record,
                         cluster=cluster, selection=selection, live=live, live_port=live_port, live_host=live_host,
                         live_control=live_control)
    code, _problems = validate_suite(Settings.resolve(cache_dir, libvirt_uri), request, err)
    raise typer.Exit(code)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="a run's --out folder")]) -> None:
    """Regenerate DIR/report.html and DIR/junit.xml from the run's results and episode folders."""
    from runner.runs.report import write_reports

    html_path, junit_path = write_reports(run_dir)
    if not (run_dir / "results.jsonl").is_file():
        con.print(f"nothing has finished yet in {escape(str(run_dir))}: the report is empty "
                  "(run the same command with --resume to continue)")
    con.print(f"{escape(str(html_path))}\n{escape(str(junit_path))}")


@export_app.command("inspect")
def export_inspect_log(
    run_dir: Annotated[Path, typer.Argument(help="a run's --out folder")],
    out: Annotated[Path | None, typer.Option("--out", help="the log file [default: RUN_DIR/inspect.eval]")] = None,
) -> None:
    """Write the run as an Inspect eval log: `inspect view` opens it, read_eval_log reads it."""
    from runner.runs.inspect_export import export_inspect

    con.print(escape(str(export_inspect(run_dir, out))))


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="the baseline run folder")],
    run_b: Annotated[Path, typer.Argument(help="the run to compare with it")],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Per task and overall: the change in success from A to B, and whether it is beyond noise."""
    from runner.scoring.compare import compare_runs

    result = compare_runs(run_a, run_b)
    if as_json:
        print(json.dumps(result, indent=2))
        return

    def side(s: dict | None) -> str:
        return "-" if s is None or s["rate"] is None else f"{s['passes']}/{s['scored']} ({s['rate']:.2f})"

    table = Table("task", "A", "B", "change", "p (Fisher)", "beyond noise")
    for row in result["tasks"]:
        delta = "-" if row["delta"] is None else f"{row['delta']:+.2f}"
        p = "-" if row["p_value"] is None else f"{row['p_value']:.3f}"
        table.add_row(row["task"], side(row["a"]), side(row["b"]), delta, p,
                      "[bold]yes[/]" if row["beyond_noise"] else "no")
    o = result["overall"]
    table.add_row("overall", side(o["a"]), side(o["b"]), f"{o['mean_task_delta']:+.2f} (mean per task)",
                  f"95% CI [{o['ci95'][0]:+.2f}, {o['ci95'][1]:+.2f}]", "[bold]yes[/]" if o["beyond_noise"] else "no")
    con.print(table)
    con.print("per task: Fisher's exact test (p < 0.05); overall: paired bootstrap over tasks (interval leaves out 0)")


@tasks_app.command("list")
def tasks_list(suite: SuiteOpt = "linux-core") -> None:
    """The tasks of a suite."""
    from runner.tasks.model import load_suite

    loaded = load_suite(suite)
    table = Table("id", "profile", "timeout", "difficulty", "tags", title=f"{loaded.name} ({loaded.folder})")
    for t in loaded.tasks:
        table.add_row(t.id, t.spec.profile, f"{t.spec.timeout_s} s", t.spec.difficulty or "-", ", ".join(t.spec.tags))
    con.print(table)


@tasks_app.command("show")
def tasks_show(task_id: Annotated[str, typer.Argument(help="task id")], suite: SuiteOpt = "linux-core") -> None:
    """One task: its instruction, fields and scripts."""
    from runner.tasks.model import load_suite

    (task,) = load_suite(suite).select([task_id])
    con.print(f"[bold]{escape(task.id)}[/] ({task.spec.profile}, timeout {task.spec.timeout_s} s)\n\n"
              f"{escape(task.spec.instruction)}\n")
    for path in task.files():
        con.print(f"[dim]--- {path.relative_to(task.folder)}[/]")
        con.print(path.read_text(), highlight=False, markup=False)


@tasks_app.command("select")
def tasks_select(
    seed: Annotated[int, typer.Option("--seed", help="the shuffle's seed (random.Random(seed))")],
    count: Annotated[int, typer.Option("--count", min=1, help="tasks to keep")],
    out: Annotated[Path, typer.Option("--out", help="the selection file to write, e.g. selection.yaml")],
    suite: SuiteOpt = "linux-core",
    exclude_ids: Annotated[Path | None, typer.Option(
        "--exclude-ids", help="a file of task ids to leave out, one per line")] = None,
    exclude_tags: Annotated[str | None, typer.Option("--exclude-tags", help="comma-separated tags to leave out")] = None,
    baseline: Annotated[str, typer.Option("--baseline", help="the no-agent baseline: nop, or none to keep every task")] = "nop",
    vm_pool: PoolOpt = 1,
    image: ImageOpt = None,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Draw a study's tasks by a published rule: sort, shuffle with --seed, keep a task only when the
    baseline completes setup and verification and scores 0, stop at --count."""
    from runner.runs.run import RunRequest, run_suite
    from runner.tasks.model import load_suite
    from runner.tasks.selection import Exclusions, baseline_runner, draw

    if baseline not in ("nop", "none"):
        raise UsageError(f"--baseline must be nop or none, not {baseline!r}")
    loaded = load_suite(suite)
    ids = tuple(line.split("#")[0].strip() for line in exclude_ids.read_text().splitlines()) if exclude_ids else ()
    exclusions = Exclusions(tuple(i for i in ids if i), _comma_list(exclude_tags))
    settings = Settings.resolve(cache_dir, libvirt_uri)
    folder = out.parent / f"{out.stem}.baseline"

    def run(task_ids: tuple[str, ...]) -> list:
        request = RunRequest(suite=suite, agent="nop", tasks=task_ids, vm_pool=vm_pool, out=folder,
                             resume=folder.exists(), image=image, accel=accel, start=start)
        return run_suite(settings, request, err).records

    selection = draw(loaded, seed, count, exclusions, baseline_runner(run) if baseline != "none" else None,
                     batch=vm_pool, baseline_name=baseline)
    if baseline != "none":
        selection.baseline_run = folder.name
    out.write_text(selection.as_yaml())
    for s in selection.skipped:
        con.print(f"[yellow]skipped[/] {escape(s['id'])}: {escape(s['reason'])}", highlight=False)
    con.print(f"{out}: {len(selection.tasks)} of {count} tasks drawn with seed {seed}: {', '.join(selection.tasks)}")
    if len(selection.tasks) < count:
        con.print(f"[yellow]the suite ran out: only {len(selection.tasks)} tasks pass the rule[/]")


@tasks_app.command("lint")
def tasks_lint(suite: SuiteOpt = "linux-core") -> None:
    """Check every task: schema, scripts present, every .sh passes sh -n, every .ps1 parses."""
    from runner.tasks.lint import errors, lint_suite

    checked, problems = lint_suite(suite)
    for p in problems:
        colour = "red" if p.severity == "error" else "yellow"
        con.print(f"[{colour}]{escape(str(p.path))}[/]: {p.severity}: {escape(p.message)}", highlight=False)
    failed = errors(problems)
    warned = len(problems) - len(failed)
    if failed:
        con.print(f"{len(failed)} errors and {warned} warnings in {checked} tasks")
        raise typer.Exit(1)
    con.print(f"{checked} tasks, no errors" + (f", {warned} warnings" if warned else ""))


@study_app.command("run")
def study_run(
    study: Annotated[Path, typer.Argument(help="the study file (YAML)")],
    out: OutOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="finish the study in --out, redoing nothing finished")] = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Run every arm of a study on its tasks, interleaved on one pool; a run folder per arm and a comparison."""
    from runner.runs.study import run_study

    raise typer.Exit(run_study(Settings.resolve(cache_dir, libvirt_uri), study, out, resume, err))


@host_app.command("join")
def host_join(
    address: Annotated[str, typer.Argument(help="the Ray head's HOST:PORT")],
    slots: Annotated[int, typer.Option("--slots", min=1, help="episodes this machine runs at once")] = 1,
    name: Annotated[str | None, typer.Option("--name", help="this host's name [default: the hostname]")] = None,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Join a Ray cluster as a cu-run host and serve episodes until Ctrl-C.

    Checks first that this machine can run episodes. The cluster's token comes from
    RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token.
    """
    from runner.cluster.join import join

    join(address, Settings.resolve(cache_dir, libvirt_uri), slots, name, lambda line: err.print(escape(line)),
         stopping=lambda: False)


@cluster_app.command("local")
def cluster_local(
    hosts: Annotated[int, typer.Option("--hosts", min=1, help="cu-run hosts to start, each its own Ray node")] = 2,
    slots: Annotated[int, typer.Option("--slots", min=1, help="slots per host")] = 1,
    folder: Annotated[Path, typer.Option("--dir", help="the hosts' cache folders (DIR/host-<i>), logs and token")]
        = Path("cu-run-cluster"),
) -> None:
    """Start a Ray head and N cu-run hosts on this machine, as if they were N machines.

    Prints one JSON line (address, token file, hosts with their cache folder and raylet pid),
    then serves until Ctrl-C or SIGTERM, when it stops every node and removes their domains.
    """
    from runner.cluster.local import LocalCluster

    cluster = LocalCluster(folder, hosts, slots, lambda line: err.print(escape(line), highlight=False))
    try:
        described = cluster.start()
        print(json.dumps(described), flush=True)
        err.print(f"serving; clients need the token: export RAY_AUTH_TOKEN_PATH={described['token_file']}",
                  highlight=False)
        cluster.serve(stopping=lambda: False)
    finally:
        with err.status("stopping the cluster: ending runs, stopping nodes, removing domains"):
            cluster.stop()
        err.print("every node stopped and the hosts' domains removed")


@cluster_app.command("status")
def cluster_status_cmd(
    address: Annotated[str, typer.Argument(help="the Ray head's HOST:PORT")],
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document instead of a table")] = False,
) -> None:
    """Each cu-run host of the cluster: slots, accelerator and CPU, images, warm states, episodes in flight."""
    from runner.cluster.driver import cluster_status

    hosts = cluster_status(address)
    if as_json:
        print(json.dumps({"address": address, "hosts": hosts}, indent=2))
        return
    table = Table("host", "version", "slots", "accel", "cpu", "images (sha256)", "warm slots", "in flight")
    for h in hosts:
        images = "\n".join(f"{i['name']} {i['sha256'][:12]}" for i in h["images"]) or "-"
        warm = "\n".join(f"{name}: {len(s)}" for name, s in h["warm"].items() if s) or "-"
        flight = "\n".join(f"{f['task']} #{f['trial']} ({f['phase']})" for f in h["in_flight"]) or "-"
        table.add_row(escape(h["name"]), h["version"], str(h["slots"]), h["accel"].upper(),
                      escape(f"{h['facts']['cpu']} x{h['facts']['cores']}"), images, warm, escape(flight))
    con.print(table)


def _status_and_log(status, console, what: str) -> Callable[[str], None]:
    """A progress callback: each line on the status bar after WHAT, and printed."""
    def progress(line: str) -> None:
        status.update(f"{what}: {line}")
        console.print(line)
    return progress


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from runner.owner import raise_on_termination

    raise_on_termination()
    try:
        app()
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(1)
    except InfraError as exc:
        err.print(f"[bold red]infrastructure error:[/] {escape(str(exc))}")
        sys.exit(3)
    except CuRunError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted; everything started was removed")
        sys.exit(130)
