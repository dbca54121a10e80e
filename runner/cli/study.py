"""`cu-run study run`: arms of agents and MCP servers on one task list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.config import Settings
from runner.cli.options import (
    CacheDir,
    ClusterOpt,
    err,
    LibvirtUri,
    LiveControlOpt,
    LiveHostOpt,
    LiveOpt,
    LivePortOpt,
    OutOpt,
    study_app,
)


@study_app.command("run")
def study_run(
    study: Annotated[Path, typer.Argument(help="the study file (YAML)")],
    out: OutOpt = None,
    resume: Annotated[bool, typer.Option("--resume", help="finish the study in --out, redoing nothing finished")] = False,
    cluster: ClusterOpt = None,
    live: LiveOpt = False,
    live_port: LivePortOpt = 0,
    live_host: LiveHostOpt = "127.0.0.1",
    live_control: LiveControlOpt = False,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Run every arm of a study on its tasks, interleaved on one pool (this machine's slots, or a
    cluster's hosts); a run folder per arm and a comparison."""
    from runner.api import pool_opener_for
    from runner.runs.request import Where
    from runner.runs.study import run_study

    where = Where(cluster=cluster, live=live, live_port=live_port, live_host=live_host, live_control=live_control)
    raise typer.Exit(run_study(Settings.resolve(cache_dir, libvirt_uri), study, out, resume, err, where,
                               pool_opener_for(cluster)))
