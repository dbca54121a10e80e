"""`cu-run study run`: arms of agents and MCP servers on one task list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runner.config import Settings
from runner.cli.options import (
    CacheDir,
    err,
    LibvirtUri,
    OutOpt,
    study_app,
)


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
