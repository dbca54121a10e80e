"""A run's request, and the table of its options: each run option is declared once, as a field of
the part of the request that holds it, with its help, its range and the commands that take it.

The table (RUN_OPTIONS) is those fields, part by part. From it come:
- the options of `cu-run run`, `validate` and `study run` (runner.cli.options.takes_run_options);
- the Python API's keywords: RunOptions, written out for type checkers, held to the table by
  tests/unit/test_run_options.py;
- run.json's "arguments" (RunRequest.arguments), and what a resume must keep (runner.runs.resume_check);
- a study file's keys and their defaults and ranges (runner.runs.study);
- what a cluster host must apply (tests/unit/test_cluster_options.py).

A value is made its part's type once, at the edge (RunRequest.of): a path from text, a tuple from
a list, a choice (runner.choices) from its text. A part refuses a value out of its range, naming
the flag, however it was made. This module imports nothing heavy: every command's start-up reads it.
"""

from __future__ import annotations

import json
import operator
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from enum import StrEnum
from functools import reduce
from pathlib import Path
from types import GenericAlias, UnionType
from typing import Any, Literal, TypedDict, TypeVar, Unpack, get_args, get_origin, get_type_hints

from runner.choices import AccelChoice, Gate, NetMode, StartChoice, chosen
from runner.errors import UsageError
from runner.mcp.toolsets import DEFAULT_TOOLSETS
from runner.tasks.model import TagFilter

# Who takes an option besides the Python API (which takes them all): `cu-run run`, `cu-run validate`,
# `cu-run study run`'s command line, and a study file, at its top or in an arm.
Command = Literal["run", "validate", "study", "study file", "arm"]
_ABOUT = "run option"  # the key of a part's field's metadata that makes it a row of the table
T = TypeVar("T")


@dataclass(frozen=True)
class RunOption:
    """A row of the table: one run option."""

    name: str  # the API's keyword, run.json's key; the command line's flag is --name, dashed
    part: str  # the part of RunRequest that holds it
    field: str  # its field there
    type: Any  # the part's type for it
    takes: Any  # what the edge takes (RunOptions): the type, or text, a list or a mapping it is made from
    default: Any  # MISSING when it must be given
    help: str
    commands: frozenset[Command]  # who takes it besides the Python API
    at_least: float | None  # its range, where it has one
    at_most: float | None
    flag: str  # the command line's
    env: str | None  # an environment variable that gives it on the command line
    study_key: str  # a study file's key for it
    positional: bool  # the API takes it by position: cu_run.run(suite, agent)
    episode: bool  # each episode is made with it, so a cluster host must apply it
    kept: bool  # a resume must keep it: another value would add episodes unlike the run's
    folded_into: str | None = None  # read at the edge into that option, and held there (exclude_tags)

    @property
    def required(self) -> bool:
        return self.default is MISSING


def about(text: str, commands: tuple[Command, ...] = (), *, at_least: float | None = None,
          at_most: float | None = None, flag: str = "", env: str | None = None, study_key: str = "", name: str = "",
          positional: bool = False, episode: bool = False, kept: bool = False) -> dict[str, dict[str, Any]]:
    """A part's field's metadata that makes it a run option: its row's columns (RunOption), TEXT its help."""
    return {_ABOUT: {"help": text, "commands": frozenset(commands), "at_least": at_least, "at_most": at_most,
                     "flag": flag, "env": env, "study_key": study_key, "name": name, "positional": positional,
                     "episode": episode, "kept": kept}}


def option(default: T, text: str, commands: tuple[Command, ...] = (), **columns: Any) -> T:
    """A part's field that is a run option with DEFAULT and the help TEXT (`about`: the other columns)."""
    return field(default=default, metadata=about(text, commands, **columns))


RUNS: tuple[Command, ...] = ("run", "validate")
RUNS_AND_STUDY_FILE: tuple[Command, ...] = (*RUNS, "study file")
RUNS_AND_STUDY: tuple[Command, ...] = (*RUNS, "study")


@dataclass(frozen=True)
class _Part:
    """A part of a request: it refuses an option out of its range, however it was made."""

    def __post_init__(self) -> None:
        for f in fields(self):
            spec = f.metadata.get(_ABOUT)
            if spec is not None:
                check_range(option_named(spec["name"] or f.name), getattr(self, f.name))


@dataclass(frozen=True)
class Work(_Part):
    """What to run: the tasks, and how many times. The plan reads it (runner.runs.run_plan)."""

    suite: str = field(metadata=about("built-in suite name (tasks/NAME) or a suite folder", RUNS_AND_STUDY_FILE,
                                      positional=True))
    tasks: tuple[str, ...] = option((), "comma-separated task ids [default: all]", RUNS_AND_STUDY_FILE)
    selection: Path | None = option(
        None, "a selection.yaml of `tasks select`: its tasks; refused if the suite changed since", RUNS_AND_STUDY_FILE)
    tags: TagFilter = option(  # and --exclude-tags, read into it at the edge (_rows)
        TagFilter(), "run tasks with one of these comma-separated tags; repeat it and a task needs one of each",
        RUNS)
    trials: int = option(1, "episodes per task", RUNS_AND_STUDY_FILE, at_least=1, kept=True)
    timeout_s: int | None = option(
        None, "every task's agent time limit in seconds [default: each task's timeout_s]", ("run", "arm"), at_least=1,
        flag="--timeout", episode=True, kept=True)
    adds_tasks: bool = option(False, "a walk's baseline (tasks select): each resume adds the next batch's tasks")
    assets: Path | None = option(None, "imported tasks: the asset store (cu-run assets fetch)", RUNS,
                                 env="CU_RUN_ASSETS")
    evaluators: str | None = option(
        None, "imported tasks: the metrics' source, desktop-env==VERSION or a checkout [default: desktop-env==1.0.2]",
        RUNS)


@dataclass(frozen=True)
class AgentSetup(_Part):
    """Who acts, and what it is given: read by request_agent, external_server and each episode's options."""

    name: str = field(metadata=about("who acts on the VM: a built-in agent, or MODULE:CLASS (an Agent subclass of "
                                     "yours)", ("run", "arm"), name="agent", positional=True, episode=True))
    agent_cmd: str | None = option(None, "the executable for --agent command", ("run", "arm"), episode=True, kept=True)
    max_turns: int = option(50, "model turns for claude and codex", ("run", "arm"), at_least=1, episode=True, kept=True)
    agent_script: str = option("ui_oracle.yaml", "the scripted agent's script file in each task", ("run", "arm"),
                               episode=True, kept=True)
    append_prompt: str = option(  # a study arm names a file that holds it
        "", "text after cu-run's system prompt, for claude and codex", ("run", "arm"),
        study_key="append_system_prompt", episode=True, kept=True)
    agent_env: tuple[tuple[str, str], ...] = option(
        (), "KEY=VALUE in the agent's environment, over the runner's (repeat it)", ("run", "arm"), study_key="env",
        episode=True, kept=True)
    model: str | None = option(
        None, "the model of the claude or codex agent, passed to its CLI and recorded in run.json [default: the "
              "CLI's own]", ("run",), episode=True, kept=True)
    tools: tuple[str, ...] = option(DEFAULT_TOOLSETS, "MCP tool sets the agent may use", ("run", "arm"), episode=True,
                                    kept=True)
    max_steps: int | None = option(None, "tool calls per episode; then timeout", ("run", "arm"), at_least=1, episode=True,
                                   kept=True)
    mcp_server: str | None = option(
        None, "an external MCP server's command, per episode ({vnc}, {vnc_host}, {vnc_port} filled in), instead of "
              "cu-run's tools", ("run", "arm"), episode=True, kept=True)
    mcp_server_url: str | None = option(None, "an external MCP server's URL", ("run", "arm"), episode=True, kept=True)


@dataclass(frozen=True)
class HowToRun(_Part):
    """How the episodes' VMs run: read by the run scope (runner.runs.scope)."""

    vm_pool: int = option(1, "episodes at once (one VM each)", RUNS_AND_STUDY_FILE, at_least=1)
    image: str | None = option(None, "catalog image [default: by the suite's profile]", RUNS_AND_STUDY_FILE)
    accel: AccelChoice = option(AccelChoice.auto, "auto (probe), kvm or tcg", RUNS_AND_STUDY_FILE)
    start: StartChoice = option(
        StartChoice.auto, "warm (restore a saved state), cold (boot), or auto: warm when every slot has a valid state",
        RUNS_AND_STUDY_FILE)
    standby: bool = option(True, "with spare warm states, each slot's next VM is made ready ahead (runner.runs.standby)",
                           episode=True)
    record: bool = option(False, "each episode's screen to recording.mp4 (H.264, 2 fps)", RUNS, episode=True)
    net: NetMode = option(
        NetMode.live, "a networked task's proxy: live (its allowed origins), record (live, each episode's answers to "
                      "its cassette.jsonl) or replay (the task's cassette alone, air-gapped) (docs/network.md)",
        RUNS, episode=True, kept=True)
    net_hosts: Path | None = option(
        None, "with live or record: a YAML file of name: address:port (and ca:) sending allowed names to a mirror or "
              "loopback stand-ins (docs/network.md)", RUNS, episode=True)


@dataclass(frozen=True)
class Where(_Part):
    """Where the pool is and what it shows: this machine, or a Ray cluster's cu-run hosts
    (runner.cluster); and the live view (runner.live) while it runs."""

    cluster: str | None = option(
        None, "a Ray cluster's HOST:PORT: run on its cu-run hosts (token: RAY_AUTH_TOKEN_PATH)", RUNS_AND_STUDY)
    live: bool = option(False, "serve a live view of the VMs' screens; prints its URL (docs/live.md)", RUNS_AND_STUDY)
    live_port: int = option(0, "the live view's port [default: any free one]", RUNS_AND_STUDY)
    live_host: str = option("127.0.0.1", "the live view's address; beyond loopback, read docs/live.md first", RUNS_AND_STUDY)
    live_control: bool = option(
        False, "the live view may take the mouse and keyboard; every input is recorded as an intervention", RUNS_AND_STUDY)


@dataclass(frozen=True)
class ResultsTo(_Part):
    """Where the results go, and what they must reach: read by the run lifecycle (runner.runs.run)."""

    out: Path | None = option(None, "run folder [default: runs/<suite>-<agent>-<time>]", RUNS)
    resume: bool = option(False, "finish the run in --out, redoing nothing finished", ("run",))
    fail_under: float | None = option(None, "exit 4 if the success rate is lower", ("run",), at_least=0, at_most=1)
    gate: Gate = option(Gate.all, "--fail-under over all tasks, or stable: flaky tasks left out", ("run",))


# The table: the parts' fields, in this order (each part is a dataclass, as mypy reads it).
_PARTS: tuple[tuple[str, Any], ...] = (("work", Work), ("agent", AgentSetup), ("how", HowToRun), ("where", Where),
                                       ("results", ResultsTo))


def _takes(kind: Any) -> Any:
    """What the edge takes for an option of KIND: text for a path or a choice, a list for a tuple."""
    taken: list[Any] = []
    for one in get_args(kind) if isinstance(kind, UnionType) else (kind,):
        if one is Path or (isinstance(one, type) and issubclass(one, StrEnum)):
            taken += [str, one]
        elif get_origin(one) is tuple and get_args(one)[1:] == (...,):
            taken += [GenericAlias(list, get_args(one)[:1]), one]
        else:
            taken.append(one)
    return reduce(operator.or_, taken)


# What the edge takes beyond the rule of _takes: the command line's and a study file's spellings.
_TAKES: dict[str, Any] = {"tags": list[str] | TagFilter | None, "tools": str | list[str] | tuple[str, ...],
                          "agent_env": dict[str, str] | tuple[tuple[str, str], ...]}


def _row(name: str, part: str, field_name: str, kind: Any, default: Any, spec: dict[str, Any],
         folded_into: str | None = None) -> RunOption:
    columns = {**spec, "flag": spec["flag"] or "--" + name.replace("_", "-"), "study_key": spec["study_key"] or name}
    del columns["name"]
    return RunOption(name=name, part=part, field=field_name, type=kind, takes=_TAKES.get(name) or _takes(kind),
                     default=default, folded_into=folded_into, **columns)


def _rows() -> tuple[RunOption, ...]:
    rows: list[RunOption] = []
    for part, kind in _PARTS:
        hints = get_type_hints(kind)
        for f in fields(kind):
            spec = f.metadata[_ABOUT]
            name = spec["name"] or f.name
            rows.append(_row(name, part, f.name, hints[f.name], f.default, spec))
            if name == "tags":  # --exclude-tags, read at the edge into the tags (a TagFilter)
                rows.append(_row("exclude_tags", part, f.name, list[str] | None, None,
                                 about("leave out tasks with any of these tags", RUNS)[_ABOUT], folded_into=name))
    return tuple(rows)


RUN_OPTIONS: tuple[RunOption, ...] = _rows()
_BY_NAME = {row.name: row for row in RUN_OPTIONS}
KEYWORDS = frozenset(row.name for row in RUN_OPTIONS if not row.positional)  # the API's: RunOptions' keys


def option_named(name: str) -> RunOption:
    return _BY_NAME[name]


def options_for(command: Command) -> tuple[RunOption, ...]:
    """The rows of the options COMMAND takes, in the table's order."""
    return tuple(row for row in RUN_OPTIONS if command in row.commands)


def check_range(row: RunOption, value: Any) -> None:
    """VALUE within ROW's range, or a UsageError naming the flag."""
    low, high = row.at_least, row.at_most
    if value is None or (low is None and high is None):
        return
    if high is None and value < low:
        raise UsageError(f"{row.flag} must be at least {low}, not {value}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise UsageError(f"{row.flag} must be between {low} and {high}, not {value}")


class RunOptions(TypedDict, total=False):
    """A run's options by their names, as the Python API (cu_run.run, validate, run_request) takes
    them: the table's (RUN_OPTIONS) keywords and the types its edge takes. Written out, as type
    checkers read no table; tests/unit/test_run_options.py holds the two to each other."""

    tasks: list[str] | tuple[str, ...]
    selection: str | Path | None
    tags: list[str] | TagFilter | None
    exclude_tags: list[str] | None
    trials: int
    timeout_s: int | None
    adds_tasks: bool
    assets: str | Path | None
    evaluators: str | None
    agent_cmd: str | None
    max_turns: int
    agent_script: str
    append_prompt: str
    agent_env: dict[str, str] | tuple[tuple[str, str], ...]
    model: str | None
    tools: str | list[str] | tuple[str, ...]
    max_steps: int | None
    mcp_server: str | None
    mcp_server_url: str | None
    vm_pool: int
    image: str | None
    accel: str | AccelChoice
    start: str | StartChoice
    standby: bool
    record: bool
    net: str | NetMode
    net_hosts: str | Path | None
    cluster: str | None
    live: bool
    live_port: int
    live_host: str
    live_control: bool
    out: str | Path | None
    resume: bool
    fail_under: float | None
    gate: str | Gate


@dataclass(frozen=True)
class RunRequest:
    """One run, in the parts each layer reads: what to run (work, agent), how and where it runs
    (how, where), and where its results go (results)."""

    work: Work
    agent: AgentSetup
    how: HowToRun = HowToRun()
    where: Where = Where()
    results: ResultsTo = ResultsTo()

    @classmethod
    def of(cls, suite: str | Path, agent: str, **options: Unpack[RunOptions]) -> RunRequest:
        """A request from options by name (RunOptions; the callers with typed keywords are
        cu_run.run, validate and run_request). An unknown option is a TypeError."""
        unknown = sorted(set(options) - KEYWORDS)
        if unknown:
            raise TypeError(f"unknown run option {', '.join(unknown)}; the options are: {', '.join(sorted(KEYWORDS))}")
        given: dict[str, Any] = dict(options)
        tags, exclude = given.pop("tags", None), given.pop("exclude_tags", None)
        given["tags"] = tags if isinstance(tags, TagFilter) else TagFilter((tuple(tags),) if tags else (),
                                                                         tuple(exclude or ()))
        return cls._from_flat({"suite": str(suite), "agent": str(agent),
                               **{name: _typed(_BY_NAME[name], value) for name, value in given.items()}})

    def options(self) -> dict[str, Any]:
        """Every option by its name (suite and agent included), as the parts hold it."""
        return {row.name: getattr(getattr(self, row.part), row.field) for row in RUN_OPTIONS if not row.folded_into}

    def arguments(self) -> dict[str, Any]:
        """run.json's "arguments": every option by its name, as JSON holds it."""
        return json.loads(json.dumps(self.options(), default=_as_json))

    def with_options(self, **changes: Any) -> RunRequest:
        """This request with CHANGES, by name, already of the parts' types."""
        unknown = sorted(set(changes) - set(self.options()))
        if unknown:
            raise TypeError(f"unknown run option {', '.join(unknown)}")
        return self._from_flat({**self.options(), **changes})

    @classmethod
    def _from_flat(cls, flat: dict[str, Any]) -> RunRequest:
        parts: dict[str, dict[str, Any]] = {part: {} for part, _kind in _PARTS}
        for name, value in flat.items():
            row = _BY_NAME[name]
            parts[row.part][row.field] = value
        return cls(**{part: kind(**parts[part]) for part, kind in _PARTS})


def _typed(row: RunOption, value: Any) -> Any:
    """VALUE, as the command line, the API or a study file gives it, made ROW's type: the edge's one
    conversion. A choice's text that is not one is a UsageError naming the flag."""
    if value is None:
        return None
    kinds = get_args(row.type) if isinstance(row.type, UnionType) else (row.type,)
    if Path in kinds:
        return Path(value)
    if isinstance(row.type, type) and issubclass(row.type, StrEnum):
        return chosen(row.type, value, row.flag)
    if get_origin(row.type) is tuple:
        if row.name == "tools" and isinstance(value, str):  # "screen,mouse", as the command line takes it
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return tuple(value.items()) if isinstance(value, dict) else tuple(value)
    return value


def _as_json(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not a run option's type")
