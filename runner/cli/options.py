"""What every command group shares: the apps, the consoles, the options and their choices."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from runner.choices import AccelChoice, StartChoice
from runner.console import make_console
from runner.runs.request import Command as RunCommand
from runner.runs.request import RunOption, option_named, options_for
from runner.tasks.model import TagFilter

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


ATTACK_PREFIX = "attack-"  # runner.audit.attacks.PREFIX, not imported here: the help stays light


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
    """The agents, the audit's attacks as one entry: they are listed by `cu-run audit --help`."""
    from runner.agents.registry import agent_names

    names = agent_names()
    attacks = [n for n in names if n.startswith(ATTACK_PREFIX)]
    return tuple(n for n in names if n not in attacks) + ((f"{ATTACK_PREFIX}NAME (the audit's attacks)",) if attacks else ())


def _a_benchmark(name: str) -> str:
    """A registered benchmark's name (runner.benchmarks.registry), or a usage error listing them."""
    from runner.benchmarks.registry import names

    if name not in names():
        raise typer.BadParameter(f"{name!r} is not one of {', '.join(names())}", param_hint="'BENCH'")
    return name


BenchArg = Annotated[str, typer.Argument(help="the benchmark: osworld or waa (runner.benchmarks.registry)",
                                         callback=_a_benchmark, metavar="BENCH", show_default=False)]


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


def _some_tasks(text: str | None) -> str | None:
    """--tasks names at least one task: an empty list (a script's unset variable) is refused rather
    than read as every task of the suite."""
    if text is not None and not _comma_list(text):
        raise typer.BadParameter(f"{text!r} names no task; leave --tasks out to run them all", param_hint="'--tasks'")
    return text


def tag_filter(tags: list[str] | None, exclude_tags: str | None) -> TagFilter:
    """--tags (each a comma-separated group, repeated) and --exclude-tags, as the request holds them."""
    groups = tuple(g for g in (_comma_list(t) for t in tags or []) if g)
    return TagFilter(groups, _comma_list(exclude_tags))


@dataclass(frozen=True)
class Spelt:
    """How the command line spells a run option it takes as text of its own (a comma list, KEY=VALUE
    pairs): its type and default there, its check, and how its value is read into the option's."""

    type: Any = None  # None: the row's type and default
    default: Any = None
    read: Callable[[Any], Any] | None = None  # None: as typer gives it
    callback: Callable[[Any], Any] | None = None  # typer's check of the value
    help: str | None = None  # None: the row's


# The table (runner.runs.request.RUN_OPTIONS) gives every option's flag, help, default and range;
# these few the command line spells otherwise. --tags and --exclude-tags are read together (tag_filter).
SPELT: dict[str, Spelt] = {
    "agent": Spelt(callback=_agent_name, help=(
        f"who acts on the VM: {registered_for_help(_agent_names)}, or MODULE:CLASS (an Agent subclass of yours)")),
    "tasks": Spelt(str | None, read=_comma_list, callback=_some_tasks),
    "tags": Spelt(list[str] | None),
    "exclude_tags": Spelt(str | None),
    "tools": Spelt(str, ",".join(option_named("tools").default), read=_comma_list),
    "agent_env": Spelt(list[str] | None, read=lambda pairs: _key_values(pairs or [])),
}


def from_table(name: str) -> Any:
    """NAME's row of the table as a typer option: its flag, help, range and environment variable
    (typer.Option's OptionInfo, typed Any as typer.Option is)."""
    row, spelt = option_named(name), SPELT.get(name)
    return typer.Option(row.flag, help=spelt.help if spelt and spelt.help else row.help, min=row.at_least,
                        max=row.at_most, envvar=row.env, callback=spelt.callback if spelt else None)


# The table's options that other commands take too, each made from its row.
# Choices are enums: a misspelt value fails at parse time, naming the flag, before any work.
AccelOpt = Annotated[AccelChoice, from_table("accel")]
StartOpt = Annotated[StartChoice, from_table("start")]
LiveOpt = Annotated[bool, from_table("live")]
LivePortOpt = Annotated[int, from_table("live_port")]
LiveHostOpt = Annotated[str, from_table("live_host")]
LiveControlOpt = Annotated[bool, from_table("live_control")]
ClusterOpt = Annotated[str | None, from_table("cluster")]
SuiteOpt = Annotated[str, from_table("suite")]
TagsOpt = Annotated[list[str] | None, from_table("tags")]
ExcludeTagsOpt = Annotated[str | None, from_table("exclude_tags")]
AssetsOpt = Annotated[Path | None, from_table("assets")]
EvaluatorsOpt = Annotated[str | None, from_table("evaluators")]
PoolOpt = Annotated[int, from_table("vm_pool")]
ImageOpt = Annotated[str | None, from_table("image")]


CommandFn = TypeVar("CommandFn", bound=Callable[..., None])


def takes_run_options(command: RunCommand) -> Callable[[CommandFn], CommandFn]:
    """Gives the decorated command, whose parameters end in **options, the table's options COMMAND
    takes, as typer options: its own positional-or-keyword parameters, then the table's (those that
    must be given first, then in the table's order), then its keyword-only ones. typer reads a
    command's parameters from its __signature__; the command gets the table's in OPTIONS, by their
    names, as the command line spells them (request_options reads them into the API's)."""
    def with_options(function: CommandFn) -> CommandFn:
        own = list(inspect.signature(function, eval_str=True).parameters.values())
        table = [_parameter(row) for row in sorted(options_for(command), key=lambda row: not row.required)]
        function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(kind=p.KEYWORD_ONLY) for p in own if p.kind is p.POSITIONAL_OR_KEYWORD] + table
            + [p for p in own if p.kind is p.KEYWORD_ONLY])
        return function
    return with_options


def _parameter(row: RunOption) -> inspect.Parameter:
    spelt = SPELT.get(row.name)
    kind, default = (spelt.type, spelt.default) if spelt and spelt.type is not None else (row.type, row.default)
    if default is MISSING:
        default = inspect.Parameter.empty
    return inspect.Parameter(row.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, from_table(row.name)])


def request_options(given: dict[str, Any]) -> dict[str, Any]:
    """The command line's values of the table's options (takes_run_options) as the API takes them
    (runner.runs.request.RunOptions)."""
    options = {name: _read(name, value) for name, value in given.items()}
    if "tags" in options:
        options["tags"] = tag_filter(options["tags"], options.pop("exclude_tags", None))
    return options


def _read(name: str, value: Any) -> Any:
    spelt = SPELT.get(name)
    return spelt.read(value) if spelt is not None and spelt.read is not None else value


def _status_and_log(status, console, what: str) -> Callable[[str], None]:
    """A progress callback: each line on the status bar after WHAT, and printed."""
    def progress(line: str) -> None:
        status.update(f"{what}: {line}")
        console.print(line)
    return progress
