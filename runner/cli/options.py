"""What every command group shares: the apps, the consoles, the options and their choices."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from runner.choices import AccelChoice, NetMode, StartChoice
from runner.console import make_console

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Run computer-use agents on local VMs, many at once, and score them.")
image_app = typer.Typer(no_args_is_help=True, help="Build and list golden images.")
tasks_app = typer.Typer(no_args_is_help=True, help="List, show, write and lint task suites.")
suites_app = typer.Typer(no_args_is_help=True, help="The built-in task suites.")
vm_app = typer.Typer(no_args_is_help=True, help="Start episode VMs by hand.")
export_app = typer.Typer(no_args_is_help=True, help="Write a run in another tool's format.")
study_app = typer.Typer(no_args_is_help=True, help="Studies: arms of agents and MCP servers on one task list.")
host_app = typer.Typer(no_args_is_help=True, help="Make this machine a cu-run host of a Ray cluster.")
assets_app = typer.Typer(no_args_is_help=True, help="The asset store of imported benchmarks' files.")
scoring_app = typer.Typer(no_args_is_help=True, help="The scoring env of imported benchmarks' metrics.")
cluster_app = typer.Typer(no_args_is_help=True, help="Ray clusters of cu-run hosts: try one locally, see its hosts.")
app.add_typer(image_app, name="image")
app.add_typer(vm_app, name="vm")
app.add_typer(tasks_app, name="tasks")
app.add_typer(suites_app, name="suites")
app.add_typer(export_app, name="export")
app.add_typer(study_app, name="study")
app.add_typer(host_app, name="host")
app.add_typer(cluster_app, name="cluster")
app.add_typer(assets_app, name="assets")
app.add_typer(scoring_app, name="scoring")

con = make_console()
err = make_console(stderr=True)


def _print_version(asked: bool) -> None:
    if asked:
        from runner import __version__

        print(f"cu-run {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="print cu-run's version and exit")] = False) -> None:
    """Run computer-use agents on local VMs, many at once, and score them."""

CacheDir = Annotated[Path | None, typer.Option("--cache-dir", envvar="CU_RUN_HOME",
                                                  help="Image catalog and episode files [default: ~/.cache/cu-run]")]
LibvirtUri = Annotated[str | None, typer.Option("--libvirt-uri", envvar="CU_RUN_LIBVIRT_URI",
                                                   help="libvirt connection [default: qemu:///system]")]


def _agent_name(name: str) -> str:
    """--agent: a built-in agent (runner.agents.registry), or MODULE:CLASS (an Agent subclass of the user's)."""
    from runner.agents.registry import agent_names

    if name in agent_names() or re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", name):
        return name
    raise typer.BadParameter(f"{name!r} is not an agent: use one of {', '.join(agent_names())}, "
                             "or MODULE:CLASS for an Agent subclass of yours", param_hint="'--agent'")


def registered_for_help(names: Callable[[], tuple[str, ...]]) -> str:
    """NAMES(), a registry's names, for a help text, made only when help is asked for: listing
    them imports every module that registers one (each agent, each image builder), which cost
    every command a second at start-up when the help texts were made at import."""
    if "--help" not in sys.argv[1:]:
        return "one of those --help lists"
    return ", ".join(names())


def _agent_names() -> tuple[str, ...]:
    from runner.agents.registry import agent_names

    return agent_names()


AgentOpt = Annotated[str, typer.Option(
    "--agent", help=f"who acts on the VM: {registered_for_help(_agent_names)}, or MODULE:CLASS (an Agent subclass "
                    "of yours)", callback=_agent_name)]


# Choices are enums: a misspelt value fails at parse time, naming the flag, before any work.
AccelOpt = Annotated[AccelChoice, typer.Option("--accel", help="auto (probe), kvm or tcg")]
StartOpt = Annotated[StartChoice, typer.Option("--start", help="warm (restore a saved state), cold (boot), or auto: "
                                                     "warm when every slot has a valid state")]


NetOpt = Annotated[NetMode, typer.Option(
    "--net", help="a networked task's proxy: live (its allowed origins), record (live, each episode's answers to its "
                  "cassette.jsonl) or replay (the task's cassette alone, air-gapped) (docs/network.md)")]
NetHostsOpt = Annotated[Path | None, typer.Option(
    "--net-hosts", help="with live or record: a YAML file of name: address:port (and ca:) sending allowed names to a "
                        "mirror or loopback stand-ins (docs/network.md)")]
LiveOpt = Annotated[bool, typer.Option("--live", help="serve a live view of the VMs' screens; prints its URL (docs/live.md)")]
LivePortOpt = Annotated[int, typer.Option("--live-port", help="the live view's port [default: any free one]")]
LiveHostOpt = Annotated[str, typer.Option("--live-host",
                                           help="the live view's address; beyond loopback, read docs/live.md first")]
LiveControlOpt = Annotated[bool, typer.Option(
    "--live-control", help="the live view may take the mouse and keyboard; every input is recorded as an intervention")]
SelectionOpt = Annotated[Path | None, typer.Option(
    "--selection", help="a selection.yaml of `tasks select`: its tasks; refused if the suite changed since")]
ClusterOpt = Annotated[str | None, typer.Option(
    "--cluster", help="a Ray cluster's HOST:PORT: run on its cu-run hosts (token: RAY_AUTH_TOKEN_PATH)")]


SuiteOpt = Annotated[str, typer.Option("--suite", help="built-in suite name (tasks/NAME) or a suite folder")]
def _some_tasks(text: str | None) -> str | None:
    """--tasks names at least one task: an empty list (a script's unset variable) is refused rather
    than read as every task of the suite."""
    if text is not None and not _comma_list(text):
        raise typer.BadParameter(f"{text!r} names no task; leave --tasks out to run them all", param_hint="'--tasks'")
    return text


TasksOpt = Annotated[str | None, typer.Option("--tasks", help="comma-separated task ids [default: all]",
                                              callback=_some_tasks)]
def _a_benchmark(name: str) -> str:
    """A registered benchmark's name (runner.benchmarks.registry), or a usage error listing them."""
    from runner.benchmarks.registry import names

    if name not in names():
        raise typer.BadParameter(f"{name!r} is not one of {', '.join(names())}", param_hint="'BENCH'")
    return name


BenchArg = Annotated[str, typer.Argument(help="the benchmark: osworld or waa (runner.benchmarks.registry)",
                                         callback=_a_benchmark, metavar="BENCH", show_default=False)]


TagsOpt = Annotated[list[str] | None, typer.Option(
    "--tags", help="run tasks with one of these comma-separated tags; repeat it and a task needs one of each")]
ExcludeTagsOpt = Annotated[str | None, typer.Option("--exclude-tags", help="leave out tasks with any of these tags")]


AssetsOpt = Annotated[Path | None, typer.Option(
    "--assets", envvar="CU_RUN_ASSETS", help="imported tasks: the asset store (cu-run assets fetch)")]
EvaluatorsOpt = Annotated[str | None, typer.Option(
    "--evaluators", help="imported tasks: the metrics' source, desktop-env==VERSION or a checkout "
                         "[default: desktop-env==1.0.2]")]


def tag_filter(tags: list[str] | None, exclude_tags: str | None):
    from runner.tasks.model import TagFilter

    groups = tuple(g for g in (_comma_list(t) for t in tags or []) if g)
    return TagFilter(groups, _comma_list(exclude_tags))


PoolOpt = Annotated[int, typer.Option("--vm-pool", min=1, help="episodes at once (one VM each)")]
TrialsOpt = Annotated[int, typer.Option("--trials", min=1, help="episodes per task")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="run folder [default: runs/<suite>-<agent>-<time>]")]
RecordOpt = Annotated[bool, typer.Option("--record", help="each episode's screen to recording.mp4 (H.264, 2 fps)")]
ImageOpt = Annotated[str | None, typer.Option("--image", help="catalog image [default: by the suite's profile]")]


def _comma_list(text: str | None) -> tuple[str, ...]:
    """--tasks a,b / --tools screen,mouse: the names, blanks dropped."""
    return tuple(t.strip() for t in (text or "").split(",") if t.strip())


def _key_values(pairs: list[str]) -> tuple[tuple[str, str], ...]:
    """--agent-env KEY=VALUE, repeated: the pairs, sorted by key (as a study arm's env is)."""
    found = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or " " in key:
            raise typer.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="'--agent-env'")
        found[key] = value
    return tuple(sorted(found.items()))


def _status_and_log(status, console, what: str) -> Callable[[str], None]:
    """A progress callback: each line on the status bar after WHAT, and printed."""
    def progress(line: str) -> None:
        status.update(f"{what}: {line}")
        console.print(line)
    return progress
