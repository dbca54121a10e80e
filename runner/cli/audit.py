"""`cu-run audit`: the battery of hostile agents against every task of a suite (docs/audit.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from runner.cli.options import app, CacheDir, con, err, LibvirtUri, request_options, takes_run_options


@app.command()
@takes_run_options("validate")
def audit(
    attacks: Annotated[str, typer.Option(
        "--attacks", help="comma-separated attacks of the battery, all of them (all), or MODULE:CLASS of your own "
                          "(an Agent subclass)")] = "all",
    quick: Annotated[Path | None, typer.Option(
        "--quick", help="a `cu-run validate` folder: its oracle and nop results are reused, and only the attacks "
                        "run")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="finish the audit in --out, redoing nothing finished")] = False,
    *,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
    **options: Any,
) -> None:
    """Run generic hostile agents against every task: which tasks can be passed without being done,
    or dropped from the rate. Writes audit.json, junit.xml and report.html; exits 4 on an unsafe pair."""
    from runner.api import audit as audit_suite

    given = request_options(options)
    result = audit_suite(given.pop("suite"), attacks, quick=quick, cache_dir=cache_dir, libvirt_uri=libvirt_uri,
                         console=err, resume=resume, **given)
    con.print(f"audit in {escape(str(result.out_dir))}")
    raise typer.Exit(result.exit_code)
