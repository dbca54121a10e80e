"""`cu-run host join|cluster local|cluster status`: many machines on Ray."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from runner.config import Settings
from runner.cli.options import (
    CacheDir,
    cluster_app,
    con,
    err,
    host_app,
    LibvirtUri,
)


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
