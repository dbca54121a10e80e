"""`cu-run tasks list|show|select|lint`: task suites."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from runner.config import Settings
from runner.errors import ExitCode, UsageError
from runner.tasks.model import Task
from runner.cli.options import (
    _comma_list,
    AccelChoice,
    AccelOpt,
    CacheDir,
    con,
    err,
    ImageOpt,
    LibvirtUri,
    PoolOpt,
    StartChoice,
    StartOpt,
    SuiteOpt,
    suites_app,
    tasks_app,
    BenchArg,
    TagsOpt,
    ExcludeTagsOpt,
    AssetsOpt,
    EvaluatorsOpt,
    tag_filter,
)


@tasks_app.command("list")
def tasks_list(suite: SuiteOpt = "linux-core", tags: TagsOpt = None, exclude_tags: ExcludeTagsOpt = None,
               counts: Annotated[bool, typer.Option("--counts", help="only the counts by tag")] = False) -> None:
    """The tasks of a suite, with the tasks that cannot run here and why, and counts by tag."""
    from collections import Counter

    from runner.tasks.model import load_suite

    loaded = load_suite(suite)
    chosen = tag_filter(tags, exclude_tags)
    shown = [t for t in loaded.tasks if chosen.matches(t)]
    if not counts:
        networked = any(t.spec.network is not None for t in shown)
        columns = ("id", "profile", "timeout", "tags", "runs here", *(("network",) if networked else ()))
        table = Table(*columns, title=f"{loaded.name} ({loaded.folder})")
        for t in shown:
            table.add_row(escape(t.id), t.spec.profile, f"{t.spec.timeout_s} s", escape(", ".join(t.spec.tags)),
                          "yes" if not t.spec.excluded else f"no: {escape('; '.join(t.spec.excluded))}",
                          *((escape(network_column(t)),) if networked else ()))
        con.print(table)
    by_tag = Counter(tag for t in shown for tag in t.spec.tags)
    runnable = Counter(tag for t in shown if not t.spec.excluded for tag in t.spec.tags)
    tally = Table("tag", "tasks", "that run here", title=f"by tag ({len(shown)} tasks{chosen.describe()})")
    for tag, number in sorted(by_tag.items(), key=lambda kv: (-kv[1], kv[0])):
        tally.add_row(escape(tag), str(number), str(runnable[tag]))
    con.print(tally)
    left_out = [t for t in shown if t.spec.excluded]
    con.print(f"{len(shown) - len(left_out)} of {len(shown)} tasks run here; runs leave out the other {len(left_out)}"
              if left_out else f"all {len(shown)} tasks run here")


def network_column(task: Task) -> str:
    """What a task's network is, for `tasks list`: whether a replay has a cassette for it."""
    network = task.spec.network
    if network is None:
        return "none"
    if network.replay:
        return f"replays {network.replay[:19]}" + ("..." if network.replay.startswith("sha256:") else "")
    if network.allow:
        return "no cassette yet: --net record, then cu-run assets cassettes"
    return "its services"


@tasks_app.command("import")
def tasks_import(
    bench: BenchArg,
    src: Annotated[Path, typer.Argument(help="its checkout, or a snapshot of its task files")],
    out: Annotated[Path, typer.Option("--out", help="the suite folder to write (new, or an earlier import)")],
    version: Annotated[str | None, typer.Option(
        "--version", help="the benchmark's commit or version [default: the checkout's commit, or the folder's name]")] = None,
) -> None:
    """Import a benchmark's tasks as a cu-run suite, scored on the host by its own metrics."""
    from runner.benchmarks.importer import import_tree

    report = import_tree(bench, src, out, version, say=lambda m: err.print(m, highlight=False))
    counts = report.as_dict()
    con.print(f"{report.written} {bench} tasks ({report.version}) written to {escape(str(out))}: "
              f"{counts['runnable']} run here, {len(report.excluded)} are left out (each with its reason), "
              f"{report.oracles} with cu-run's oracle", highlight=False)
    con.print("by category: " + ", ".join(f"{k} {v}" for k, v in counts["by_category"].items()), highlight=False)
    con.print(f"next: cu-run tasks list --suite {escape(str(out))} --counts; "
              f"cu-run assets fetch --suite {escape(str(out))} --assets DIR (on a connected machine)", highlight=False)


@tasks_app.command("new")
def tasks_new(
    name: Annotated[str, typer.Argument(help="the task's id, and its folder's name")],
    suite: Annotated[Path, typer.Option("--suite", help="the suite folder to write it in (made if missing)")],
) -> None:
    """Write a new task that lints clean: task.yaml, setup.sh, verify.sh and oracle.sh to fill in."""
    from runner.tasks.scaffold import new_task

    folder = new_task(suite, name)
    con.print(f"wrote {escape(str(folder))}: edit its instruction and scripts, then\n"
              f"  cu-run tasks lint --suite {escape(str(suite))}\n"
              f"  cu-run validate --suite {escape(str(suite))} --tasks {escape(name)}")


@suites_app.command("list")
def suites_list() -> None:
    """The built-in suites: their tasks, profile and image."""
    from runner.tasks.model import SUITES_DIR, load_suite

    table = Table("suite", "tasks", "profile", "image", "folder")
    for folder in sorted(p for p in SUITES_DIR.iterdir() if p.is_dir()):
        try:
            suite = load_suite(str(folder))
        except UsageError as exc:
            table.add_row(escape(folder.name), "-", "-", "-", f"broken: {escape(exc.message.splitlines()[0])}")
            continue
        profiles = sorted({t.spec.profile for t in suite.tasks})
        images = sorted({t.spec.image or "(the profile's)" for t in suite.tasks})
        table.add_row(escape(suite.name), str(len(suite.tasks)), ", ".join(profiles), escape(", ".join(images)),
                      escape(str(folder)))
    con.print(table)
    con.print("a suite of your own is a folder of task folders: --suite PATH (docs/tasks.md)")


@tasks_app.command("show")
def tasks_show(task_id: Annotated[str, typer.Argument(help="task id")], suite: SuiteOpt = "linux-core") -> None:
    """One task: its instruction, fields and scripts."""
    from runner.tasks.model import load_suite

    loaded = load_suite(suite)
    found = [t for t in loaded.tasks if t.id == task_id]
    if not found:
        raise UsageError(f"suite {loaded.name} has no task {task_id!r}", fix=f"cu-run tasks list --suite {suite}")
    task = found[0]
    con.print(f"[bold]{escape(task.id)}[/] ({task.spec.profile}, timeout {task.spec.timeout_s} s)\n\n"
              f"{escape(task.spec.instruction)}\n")
    for reason in task.spec.excluded:
        con.print(f"[yellow]cannot run here:[/] {escape(reason)}", highlight=False)
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
    tags: TagsOpt = None,
    baseline: Annotated[str, typer.Option("--baseline", help="the no-agent baseline: nop, or none to keep every task")] = "nop",
    assets: AssetsOpt = None,
    evaluators: EvaluatorsOpt = None,
    vm_pool: PoolOpt = 1,
    image: ImageOpt = None,
    accel: AccelOpt = AccelChoice.auto,
    start: StartOpt = StartChoice.auto,
    cache_dir: CacheDir = None,
    libvirt_uri: LibvirtUri = None,
) -> None:
    """Draw a study's tasks by a published rule: sort, shuffle with --seed, keep a task only when the
    baseline completes setup and verification and scores 0, stop at --count."""
    from runner.runs.request import RunRequest
    from runner.runs.run import run_suite
    from runner.tasks.model import load_suite
    from runner.benchmarks.task_assets import missing_assets
    from runner.tasks.selection import Exclusions, baseline_runner, draw, first_reason, offline_baseline

    if baseline not in ("nop", "none"):
        raise UsageError(f"--baseline must be nop or none, not {baseline!r}")
    loaded = load_suite(suite)
    ids = tuple(line.split("#")[0].strip() for line in exclude_ids.read_text().splitlines()) if exclude_ids else ()
    exclusions = Exclusions(tuple(i for i in ids if i), _comma_list(exclude_tags), tag_filter(tags, None).include)
    settings = Settings.resolve(cache_dir, libvirt_uri)
    folder = out.parent / f"{out.stem}.baseline"

    def run(task_ids: tuple[str, ...]) -> list:
        request = RunRequest.of(suite, "nop", tasks=task_ids, vm_pool=vm_pool, out=folder, resume=folder.exists(),
                                image=image, accel=accel, start=start, assets=assets, evaluators=evaluators,
                                adds_tasks=True)
        return run_suite(settings, request, err).records

    selection = draw(loaded, seed, count, exclusions, baseline_runner(run) if baseline != "none" else None,
                     batch=vm_pool, baseline_name=baseline,
                     precheck=first_reason(offline_baseline, missing_assets(assets)))
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
        raise typer.Exit(ExitCode.BAD_INPUT)
    con.print(f"{checked} tasks, no errors" + (f", {warned} warnings" if warned else ""))
