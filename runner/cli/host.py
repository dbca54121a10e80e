"""`cu-run version|doctor|gc`: this machine: what cu-run it runs, whether it can run episodes, what a killed run left."""

from __future__ import annotations

from typing import Annotated

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from runner.config import Settings
from runner.errors import ExitCode
from runner.cli.options import (
    app,
    CacheDir,
    con,
    err,
    LibvirtUri,
)
from runner import __version__


@app.command()
def version() -> None:
    """Print cu-run's version."""
    con.print(__version__)


@app.command()
def doctor(
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
    windows_iso: Annotated[Path | None, typer.Option(
        "--windows-iso", help="also read this Windows 11 ISO's editions, as image build would")] = None,
    virtio_iso: Annotated[Path | None, typer.Option(
        "--virtio-iso", help="also check this virtio-win ISO for the Windows 11 drivers")] = None,
) -> None:
    """Check that this host can run episodes; say how to fix what is missing."""
    from runner.vm.doctor import run_checks

    settings = Settings.resolve(cache_dir, libvirt_uri)
    with err.status("checking (the KVM probe boots a kernel; up to ~12 s)"):
        checks = run_checks(settings, windows_iso, virtio_iso)
    table = Table("check", "status", "detail", "fix")
    style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
    for c in checks:
        table.add_row(c.name, f"[{style[c.status]}]{c.status}[/]", c.detail, c.fix)
    con.print(table)
    if any(c.status == "fail" for c in checks):
        raise typer.Exit(ExitCode.BAD_INPUT)


@app.command()
def gc(
    everything: Annotated[bool, typer.Option("--all", help="also remove VMs of runs still alive")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would be removed, and remove nothing")] = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Remove the domains and overlays that crashed or killed runs left behind."""
    from runner.vm.gc import collect_garbage
    from runner.hypervisor.connect import connect_host

    settings = Settings.resolve(cache_dir, libvirt_uri)
    host = connect_host(settings.libvirt_uri)
    try:
        report = collect_garbage(host, settings, everything=everything, dry_run=dry_run)
    finally:
        host.close()
    for line in report.removed:
        con.print(f"{'would remove' if dry_run else 'removed'} {escape(line)}")
    for line in report.kept:
        con.print(f"[dim]kept {line}[/]")
    for line in report.failed:
        err.print(f"[red]could not remove {line}[/]")
    if not report.removed:
        con.print("nothing to remove")
    elif dry_run:
        con.print("nothing was removed (--dry-run)")
    if report.failed:
        raise typer.Exit(ExitCode.INFRA)
