"""`cu-run study run`: arms of agents and MCP servers on one task list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from runner.config import Settings
from runner.cli.options import CacheDir, err, LibvirtUri, request_options, study_app, takes_run_options


@study_app.command("run")
@takes_run_options("study")
def study_run(
    study: Annotated[Path, typer.Argument(help="the study file (YAML)")],
    out: Annotated[Path | None, typer.Option("--out", help="run folder [default: runs/<suite>-<agent>-<time>]")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="finish the study in --out, redoing nothing finished")] = False,
    *,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
    **options: Any,
) -> None:
    """Run every arm of a study on its tasks, interleaved on one pool (this machine's slots, or a
    cluster's hosts); a run folder per arm and a comparison."""
    # OPTIONS: the table's options for "study" (where the pool is and what it shows), by name.
    from runner.api import pool_opener_for
    from runner.runs.study import run_study

    given = request_options(options)
    raise typer.Exit(run_study(Settings.resolve(cache_dir, libvirt_uri), study, out, resume, err, given,
                               pool_opener_for(given["cluster"])))
