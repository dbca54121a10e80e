"""`cu-run assets fetch`, `cu-run scoring env|download`, `cu-run rescore`: what imported benchmark
tasks need beyond a run (docs/benchmarks.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from runner.cli.options import CacheDir, EvaluatorsOpt, SuiteOpt, app, assets_app, con, err, scoring_app
from runner.config import Settings
from runner.errors import ExitCode, UsageError

@assets_app.command("fetch")
def assets_fetch(
    suite: SuiteOpt,
    assets: Annotated[Path, typer.Option("--assets", help="the asset store to fill (made if missing)")],
    mirror: Annotated[str | None, typer.Option(
        "--mirror", help="fetch from this base URL instead of each URL's own host (a Hugging Face mirror)")] = None,
    every: Annotated[bool, typer.Option("--all", help="also the tasks that cannot run here")] = False,
) -> None:
    """On a connected machine: download every file a suite's tasks need into a content-addressed store."""
    from runner.assets import AssetStore
    from runner.benchmarks.task_assets import task_assets
    from runner.tasks.model import load_suite

    loaded = load_suite(suite)
    tasks = [t for t in loaded.tasks if every or not t.spec.excluded]
    urls = sorted({u for t in tasks for u in task_assets(t).all})
    if not urls:
        con.print(f"the {len(tasks)} tasks of {escape(loaded.name)} download nothing")
        return
    store = AssetStore(assets)
    con.print(f"{len(urls)} files for {len(tasks)} tasks of {escape(loaded.name)} into {escape(str(assets))}")
    fetched, failures = store.fetch(urls, mirror, say=lambda line: err.print(escape(line), highlight=False))
    con.print(f"fetched {fetched}; the store holds {len(store.index())} files (index: {escape(str(store.index_path))})")
    if failures:
        for failure in failures:
            err.print(f"[red]failed:[/] {escape(failure)}", highlight=False)
        err.print(f"{len(failures)} files could not be fetched; the same command fetches only what is missing")
        raise typer.Exit(ExitCode.INFRA)


@assets_app.command("cassettes")
def assets_cassettes(
    run_dir: Annotated[Path, typer.Argument(help="a --net record run's --out folder (or validate's)")],
    assets: Annotated[Path, typer.Option("--assets", help="the asset store to keep them in (made if missing)")],
) -> None:
    """Keep a recording's cassettes in the asset store, by sha256, and name them in its suite for --net replay."""
    from runner.assets import AssetStore
    from runner.records.cassettes import keep_cassettes
    from runner.tasks.model import SUITE_CASSETTES

    kept = keep_cassettes(run_dir, AssetStore(assets))
    for task_id, sha in kept.cassettes.items():
        con.print(f"{escape(task_id)}: {sha}", highlight=False)
    for task_id in kept.unrecorded:
        err.print(f"[yellow]no cassette:[/] {escape(task_id)} (no episode of it was recorded)", highlight=False)
    con.print(f"kept {len(kept.cassettes)} cassettes in {escape(str(assets))}, named in "
              f"{escape(str(kept.suite / SUITE_CASSETTES))}; replay them with: cu-run run --suite {escape(str(kept.suite))} "
              f"--net replay --assets {escape(str(assets))} ...", highlight=False)
    if not kept.cassettes:
        raise typer.Exit(ExitCode.BAD_INPUT)


@scoring_app.command("env")
def scoring_env(
    evaluators: EvaluatorsOpt = None,
    wheels: Annotated[Path | None, typer.Option(
        "--wheels", help="install offline from this folder (cu-run scoring download makes it)")] = None,
    cache_dir: CacheDir = None,
) -> None:
    """Make the scoring venv (once): the benchmark's metric functions and their packages, no torch."""
    from runner.benchmarks.scoring_env import ensure_env

    env = ensure_env(Settings.resolve(cache_dir).cache_dir, evaluators, wheels,
                     say=lambda line: err.print(escape(line), highlight=False))
    con.print(f"scoring env ready: {escape(env.version)}, evaluators sha256 {env.evaluators_sha256[:16]}, "
              f"python {escape(str(env.python))}", highlight=False)


@scoring_app.command("download")
def scoring_download(
    target: Annotated[Path, typer.Argument(help="the folder to put the wheels in")],
    evaluators: EvaluatorsOpt = None,
) -> None:
    """On a connected machine: the scoring venv's wheels, for `scoring env --wheels` on an air-gapped one."""
    from runner.benchmarks.scoring_env import download_wheels

    download_wheels(target, evaluators)
    con.print(f"wheels in {escape(str(target))}: copy the folder over, then cu-run scoring env --wheels FOLDER")


@app.command()
def rescore(
    run_dir: Annotated[Path, typer.Argument(help="a run of imported tasks")],
    out: Annotated[Path, typer.Option("--out", help="the rescored run's folder (a copy of RUN, rescored)")],
    evaluators: EvaluatorsOpt = None,
    assets: Annotated[Path | None, typer.Option("--assets", help="the asset store, for the gold files")] = None,
    cache_dir: CacheDir = None,
) -> None:
    """Score a run's imported tasks again from what each episode collected, with other evaluators."""
    from runner.records.rescore import rescore_run

    if out.resolve() == run_dir.resolve():
        raise UsageError("--out is the run itself", fix="rescore into a new folder; the run is never rewritten")
    result = rescore_run(run_dir, out, Settings.resolve(cache_dir).cache_dir, evaluators, assets,
                         say=lambda line: err.print(escape(line), highlight=False))
    changed = result.changed or []
    con.print(f"rescored {result.episodes} episodes into {escape(str(out))}; {len(changed)} changed", highlight=False)
    for line in changed:
        con.print(f"  {escape(line)}", highlight=False)
