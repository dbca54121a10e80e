"""`cu-run run|validate|report|compare|export`: runs, and what they left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from runner.cli.options import app, CacheDir, con, err, export_app, LibvirtUri, request_options, takes_run_options


@app.command()
@takes_run_options("run")
def run(*, cache_dir: CacheDir = None, libvirt_uri: LibvirtUri = None, **options: Any) -> None:
    """Run an agent over a suite on a pool of VMs; results, artifacts and a summary go to --out."""
    from runner.api import run as run_suite

    given = request_options(options)
    result = run_suite(given.pop("suite"), given.pop("agent"), cache_dir=cache_dir, libvirt_uri=libvirt_uri,
                       console=err, **given)
    con.print(f"results in {result.out_dir}")
    raise typer.Exit(result.exit_code)


@app.command()
@takes_run_options("validate")
def validate(*, cache_dir: CacheDir = None, libvirt_uri: LibvirtUri = None, **options: Any) -> None:
    """Prove a suite sound: the oracle must pass every task and the nop agent fail every one."""
    from runner.api import validate as validate_suite

    given = request_options(options)
    found = validate_suite(given.pop("suite"), cache_dir=cache_dir, libvirt_uri=libvirt_uri, console=err, **given)
    raise typer.Exit(found.exit_code)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="a run's --out folder, or validate's")]) -> None:
    """Regenerate DIR/report.html and DIR/junit.xml from the run's results and episode folders."""
    from runner.records.folders import is_validation_folder, run_folders
    from runner.records.report import write_reports, write_validation_index

    for folder in run_folders(run_dir):
        html_path, junit_path = write_reports(folder)
        if not (folder / "results.jsonl").is_file():
            con.print(f"nothing has finished yet in {escape(str(folder))}: the report is empty "
                      "(run the same command with --resume to continue)")
        con.print(f"{escape(str(html_path))}\n{escape(str(junit_path))}")
    if is_validation_folder(run_dir):
        con.print(escape(str(write_validation_index(run_dir))))


@export_app.command("inspect")
def export_inspect_log(
    run_dir: Annotated[Path, typer.Argument(help="a run's --out folder, or validate's")],
    out: Annotated[Path | None, typer.Option("--out", help="the log file [default: RUN_DIR/inspect.eval]; for a "
                                                           "validate folder, a folder for oracle.eval and nop.eval")] = None,
) -> None:
    """Write the run as an Inspect eval log: `inspect view` opens it, read_eval_log reads it."""
    from runner.records.folders import is_validation_folder, run_folders
    from runner.records.inspect_export import export_inspect

    if not is_validation_folder(run_dir):
        con.print(escape(str(export_inspect(run_dir, out))))
        return
    for folder in run_folders(run_dir):  # a validate folder: a log per run, OUT a folder for them
        con.print(escape(str(export_inspect(folder, out / f"{folder.name}.eval" if out else None))))


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="the baseline run folder")],
    run_b: Annotated[Path, typer.Argument(help="the run to compare with it")],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Per task and overall: the change in success from A to B, and whether it is beyond noise."""
    from runner.api import compare as compare_runs

    result = compare_runs(run_a, run_b).data
    if as_json:
        print(json.dumps(result, indent=2))
        return

    def side(s: dict | None) -> str:
        return "-" if s is None or s["rate"] is None else f"{s['passes']}/{s['scored']} ({s['rate']:.2f})"

    for warning in result["warnings"]:
        err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    table = Table("task", f"A: {escape(result['label_a'])}", f"B: {escape(result['label_b'])}", "change",
                  "p (Fisher)", "beyond noise")
    for row in result["tasks"]:
        delta = "-" if row["delta"] is None else f"{row['delta']:+.2f}"
        p = "-" if row["p_value"] is None else f"{row['p_value']:.3f}"
        verdict = "[bold]yes[/]" if row["beyond_noise"] else ("too few trials" if "too few" in row.get("note", "") else "no")
        table.add_row(escape(row["task"]), side(row["a"]), side(row["b"]), delta, p, verdict)
    o = result["overall"]
    table.add_row("overall", side(o["a"]), side(o["b"]), f"{o['mean_task_delta']:+.2f} (mean per task)",
                  f"95% CI [{o['ci95'][0]:+.2f}, {o['ci95'][1]:+.2f}]", "[bold]yes[/]" if o["beyond_noise"] else "no")
    con.print(table)
    con.print("per task: Fisher's exact test (p < 0.05); overall: paired bootstrap over tasks (interval leaves out 0)")
