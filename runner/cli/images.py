"""`cu-run image build|list|warm`: the catalog's golden images and their warm states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from runner.config import Settings
from runner.choices import AccelChoice
from runner.errors import UsageError
from runner.cli.options import (
    _status_and_log,
    registered_for_help,
    AccelOpt,
    CacheDir,
    ClusterOpt,
    con,
    err,
    image_app,
    LibvirtUri,
)
from runner.images.catalog import Catalog


def _buildable(name: str) -> str:
    from runner.images.builders import get_builder

    try:
        get_builder(name)
    except UsageError as unknown:  # the registry's own message, as a parse error of the argument
        raise typer.BadParameter(unknown.message) from None
    return name


def _builder_names() -> tuple[str, ...]:
    from runner.images.builders import builder_names

    return builder_names()


@image_app.command("build")
def image_build(
    name: Annotated[str, typer.Argument(help=f"the image to build: {registered_for_help(_builder_names)}", metavar="NAME",
                                        callback=_buildable)],
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
    edition: Annotated[str | None, typer.Option(
        "--edition", help="windows-11: the edition to install, by name or edition id (default: the ISO's only one, "
        "else Pro)")] = None,
    product_key: Annotated[str | None, typer.Option(
        "--product-key", help="windows-11: a key for an edition with no published setup key")] = None,
    winrm_timeout: Annotated[str, typer.Option(
        "--winrm-timeout", help="windows-11: how long packer waits for WinRM after the ISO boots (2h; hours under TCG)")
    ] = "2h",
    accel: AccelOpt = AccelChoice.auto,
    cache_dir: CacheDir = None,
) -> None:
    """Build a golden image into the catalog (reused when already built)."""
    from runner.images.builders import BuildRequest, get_builder

    settings = Settings.resolve(cache_dir)

    def chosen_accel() -> str:
        if accel != "auto":
            return str(accel)
        from runner.runs.scope import resolve_accel

        chosen, _probe = resolve_accel(settings, AccelChoice.auto)
        if chosen == "tcg":
            err.print("[yellow]KVM is not usable here: a build that boots its guest under TCG takes far longer[/]")
        return chosen

    # Each builder reads the options that are its own (windows-11: its media); the others are unset.
    options = {"iso": iso, "virtio_iso": virtio_iso, "python_installer": python_installer, "evals_seed": evals_seed,
               "iso_sha256": iso_sha256, "virtio_sha256": virtio_sha256, "python_sha256": python_sha256,
               "licence_days": licence_days, "edition": edition, "product_key": product_key,
               "winrm_timeout": winrm_timeout}
    with err.status(f"building {name}") as status:
        request = BuildRequest(Catalog(settings.images_dir), force=force, accel=chosen_accel, options=options,
                               progress=_status_and_log(status, err, f"building {name}"),
                               status=lambda line: status.update(f"building {name}: {line}"))
        image, built = get_builder(name).build(request)
    m = image.manifest
    size = f"{m.disk_bytes / 2**30:.1f} GiB" if m.disk_bytes >= 2**30 else f"{m.disk_bytes / 2**20:.0f} MiB"
    verb = f"built in {m.build_seconds:.0f} s" if built else "already built (use --force to rebuild)"
    licence = f", licence until {m.licence_expires}" if m.licence_expires else ""
    con.print(f"{m.name}: {verb}\n  disk {image.disk} ({size}, sha256 {m.disk_sha256[:16]}...){licence}")


@image_app.command("list")
def image_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON array of manifests")] = False,
    cache_dir: CacheDir = None,
) -> None:
    """Show the image catalog and each image's warm states."""
    from runner.vm.warm_state import list_slots

    settings = Settings.resolve(cache_dir)
    images = Catalog(settings.images_dir).images()
    if as_json:
        print(json.dumps([{**i.manifest.model_dump(mode="json", exclude={"packages"}),
                           "packages": len(i.manifest.packages), "folder": str(i.folder),
                           "warm": [{**s.state.model_dump(mode="json"), "folder": str(s.folder), "bytes": s.bytes}
                                    for s in list_slots(i)]} for i in images], indent=2))
        return
    for problem in Catalog(settings.images_dir).unreadable():
        err.print(f"skipped: {escape(problem.message)}\n  fix: {escape(problem.fix or '')}")
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
    from runner.hypervisor.connect import connect_host
    from runner.runs.scope import warm_outside_a_run
    from runner.vm.warm_state import remove_warm
    from runner.images.builders import image_named

    settings = Settings.resolve(cache_dir, libvirt_uri)
    image = image_named(Catalog(settings.images_dir), name)
    if cluster:
        from runner.cluster.driver import warm_on_cluster

        image.verify_disk()
        warm_on_cluster(image, cluster, accel, force, err)
        return
    if remove:
        removed = remove_warm(image)
        con.print("\n".join(f"removed {r}" for r in removed) or f"{name} has no warm states")
        return
    host = connect_host(settings.libvirt_uri)
    try:
        with err.status(f"warming {name}") as status:
            done = warm_outside_a_run(settings, host, image, accel, slots, admitted=False, force=force,
                                      progress=_status_and_log(status, err, f"warming {name}"))
    finally:
        host.close()
    total = sum(s.bytes for s in done)
    con.print(f"{name}: {len(done)} warm slots, {total / 2**20:.0f} MiB in {done[0].folder.parent}")
