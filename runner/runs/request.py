"""A run's request, and what every episode of it is made from: the same functions on this machine
and on a cluster's hosts, so an option that changes an episode reaches it wherever it runs.

A cluster run sends the RunRequest itself to each host (runner.cluster.host_service.RunOrder);
the host applies it with `episode_tasks`, `request_agent`, `external_server` and the scope's
`pool_for`, as a local run does.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypedDict, Unpack

from runner.agents.base import Agent
from runner.agents.registry import make_agent
from runner.choices import AccelChoice, Gate, NetMode, StartChoice, chosen
from runner.errors import UsageError
from runner.benchmarks.assets import assets_root
from runner.mcp.proxy import ExternalServer
from runner.network.settings import NetHosts, NetSettings
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.tasks.model import TagFilter, Task


@dataclass(frozen=True)
class Work:
    """What to run: the tasks, and how many times. The plan reads it (runner.runs.run_plan)."""

    suite: str
    tasks: tuple[str, ...] = ()
    selection: Path | None = None  # a selection.yaml of `cu-run tasks select`: its tasks, in its order
    tags: TagFilter = TagFilter()  # --tags / --exclude-tags, when --tasks names none
    trials: int = 1
    timeout_s: int | None = None  # every task's timeout_s, overridden (a study arm's)
    adds_tasks: bool = False  # a walk's baseline (tasks select): each resume adds the next batch's tasks
    assets: Path | None = None  # imported tasks: the asset store (runner.benchmarks.assets); None: CU_RUN_ASSETS
    evaluators: str | None = None  # imported tasks: the metrics' source (runner.benchmarks.scoring_env)


@dataclass(frozen=True)
class AgentSetup:
    """Who acts, and what it is given: read by request_agent, external_server and each episode's options."""

    name: str  # --agent
    agent_cmd: str | None = None
    max_turns: int = 50
    agent_script: str = "ui_oracle.yaml"  # the scripted agent's script, per task
    append_prompt: str = ""  # claude/codex: text after cu-run's system prompt (a vendor's skill text)
    agent_env: tuple[tuple[str, str], ...] = ()  # the agent's environment, over the runner's
    model: str | None = None  # claude/codex: the model, passed to the CLI and recorded (None: the CLI's default)
    tools: tuple[str, ...] = DEFAULT_TOOLSETS
    max_steps: int | None = None
    mcp_server: str | None = None  # an external MCP server's command, started per episode ({vnc} filled in)
    mcp_server_url: str | None = None  # or its URL


@dataclass(frozen=True)
class HowToRun:
    """How the episodes' VMs run: read by the run scope (runner.runs.scope)."""

    vm_pool: int = 1
    image: str | None = None
    accel: AccelChoice = AccelChoice.auto
    start: StartChoice = StartChoice.auto
    standby: bool = True  # with spare warm states, each slot's next VM is made ready ahead (runner.runs.standby)
    record: bool = False  # each episode's screen to recording.mp4
    net: NetMode = NetMode.live  # a networked task's proxy (docs/network.md)
    net_hosts: Path | None = None  # where a live or recording proxy connects allowed names (runner.network.settings)


@dataclass(frozen=True)
class Where:
    """Where the pool is and what it shows: this machine, or a Ray cluster's cu-run hosts
    (runner.cluster); and the live view (runner.live) while it runs."""

    cluster: str | None = None
    live: bool = False
    live_port: int = 0
    live_host: str = "127.0.0.1"
    live_control: bool = False  # the live view may take the mouse and keyboard (recorded as interventions)


@dataclass(frozen=True)
class ResultsTo:
    """Where the results go, and what they must reach: read by the run lifecycle (runner.runs.run)."""

    out: Path | None = None
    resume: bool = False
    fail_under: float | None = None
    gate: Gate = Gate.all  # --fail-under over all tasks, or only the stable (non-flaky) ones


class RunOptions(TypedDict, total=False):
    """A run's options by their flat names, as the CLI, the Python API (cu_run.run) and run.json's
    "arguments" spell them: the typed keyword arguments of RunRequest.of. Text is taken where the
    command line gives text (a path, "screen,mouse", "warm") and made the part's type once, there."""

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
        """A request from flat options (RunOptions; the callers with typed keywords are
        cu_run.run, validate and run_request). An unknown option is a TypeError."""
        unknown = sorted(set(options) - set(RunOptions.__annotations__))
        if unknown:
            raise TypeError(f"unknown run option {', '.join(unknown)}; the options are: "
                            f"{', '.join(sorted(RunOptions.__annotations__))}")
        given: dict[str, Any] = dict(options)
        tags, exclude = given.pop("tags", None), given.pop("exclude_tags", None)
        given["tags"] = tags if isinstance(tags, TagFilter) else TagFilter((tuple(tags),) if tags else (),
                                                                         tuple(exclude or ()))
        return cls._from_flat({"suite": str(suite), "agent": str(agent), **_edge_types(given)})

    def options(self) -> dict[str, Any]:
        """Every option by its flat name (suite and agent included): run.json's "arguments"."""
        flat: dict[str, Any] = {}
        for part, _kind in _PARTS:
            for f in fields(getattr(self, part)):
                flat[_FLAT_NAME.get((part, f.name), f.name)] = getattr(getattr(self, part), f.name)
        return flat

    def with_options(self, **changes: Any) -> RunRequest:
        """This request with CHANGES, by flat name, already of the parts' types."""
        unknown = sorted(set(changes) - set(self.options()))
        if unknown:
            raise TypeError(f"unknown run option {', '.join(unknown)}")
        return self._from_flat({**self.options(), **changes})

    @classmethod
    def _from_flat(cls, flat: dict[str, Any]) -> RunRequest:
        parts: dict[str, dict[str, Any]] = {part: {} for part, _kind in _PARTS}
        for name, value in flat.items():
            part, field_name = _PART_OF[name]
            parts[part][field_name] = value
        return cls(**{part: kind(**parts[part]) for part, kind in _PARTS})


_PARTS: tuple[tuple[str, type], ...] = (("work", Work), ("agent", AgentSetup), ("how", HowToRun), ("where", Where),
                                        ("results", ResultsTo))
_FLAT_NAME = {("agent", "name"): "agent"}  # a part's field whose flat name is not its own
_PART_OF = {_FLAT_NAME.get((part, f.name), f.name): (part, f.name) for part, kind in _PARTS for f in fields(kind)}


def _edge_types(given: dict[str, Any]) -> dict[str, Any]:
    """The CLI's and the API's values as the parts type them: paths, tuples, and the choices
    (runner.choices) made from their text here, once."""
    out = dict(given)
    for name in ("out", "selection", "assets", "net_hosts"):
        if out.get(name) is not None:
            out[name] = Path(out[name])
    if isinstance(out.get("tools"), str):  # "screen,mouse", as the CLI takes it
        out["tools"] = tuple(t.strip() for t in out["tools"].split(",") if t.strip())
    for name in ("tasks", "tools"):
        if name in out:
            out[name] = tuple(out[name])
    if isinstance(out.get("agent_env"), dict):
        out["agent_env"] = tuple(out["agent_env"].items())
    for name, kind in (("accel", AccelChoice), ("start", StartChoice), ("gate", Gate), ("net", NetMode)):
        if name in out:
            out[name] = chosen(kind, out[name], f"--{name}")
    return out


def net_settings(request: RunRequest) -> NetSettings:
    """What REQUEST's networked episodes share: --net, the asset store, --net-hosts (read and checked)."""
    hosts = NetHosts.load(request.how.net_hosts) if request.how.net_hosts is not None else None
    return NetSettings(request.how.net, assets_root(request.work.assets), hosts)


def episode_tasks(request: RunRequest, tasks: tuple[Task, ...]) -> tuple[Task, ...]:
    """TASKS as REQUEST runs them: --timeout overrides each task's timeout_s (a study arm's)."""
    timeout_s = request.work.timeout_s
    if timeout_s is None:
        return tasks
    return tuple(replace(t, spec=t.spec.model_copy(update={"timeout_s": timeout_s})) for t in tasks)


def request_agent(request: RunRequest, tasks: tuple[Task, ...]) -> Agent:
    """The agent REQUEST names, made (and checked: its CLI, its key) for TASKS."""
    setup = request.agent
    return make_agent(setup.name, tasks, command=setup.agent_cmd, max_turns=setup.max_turns, script=setup.agent_script,
                      append_prompt=setup.append_prompt, env=dict(setup.agent_env), model=setup.model)


def external_server(request: RunRequest, agent: Agent) -> ExternalServer | None:
    """--mcp-server / --mcp-server-url as an ExternalServer, refused where it cannot apply."""
    setup = request.agent
    if setup.mcp_server is None and setup.mcp_server_url is None:
        return None
    external = ExternalServer(setup.mcp_server, setup.mcp_server_url)
    external.preflight()
    if not agent.needs_mcp:
        raise UsageError(f"agent {agent.name} does not use MCP tools, so --mcp-server gives it nothing",
                         fix="use an MCP-driven agent: scripted, command, claude or codex")
    if tuple(setup.tools) != DEFAULT_TOOLSETS:
        raise UsageError("--tools chooses among cu-run's own tools; an external MCP server brings its own",
                         fix="leave out --tools with --mcp-server")
    return external
