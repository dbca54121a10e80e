"""A run's request, and what every episode of it is made from: the same functions on this machine
and on a cluster's hosts, so an option that changes an episode reaches it wherever it runs.

A cluster run sends the RunRequest itself to each host (runner.cluster.host_service.RunOrder);
the host applies it with `episode_tasks`, `request_agent`, `external_server` and the scope's
`pool_for`, as a local run does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from runner.agents.base import Agent
from runner.agents.registry import make_agent
from runner.errors import UsageError
from runner.mcp.proxy import ExternalServer
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.tasks.model import TagFilter, Task


@dataclass(frozen=True)
class RunRequest:
    suite: str
    agent: str
    tasks: tuple[str, ...] = ()
    vm_pool: int = 1
    trials: int = 1
    out: Path | None = None
    resume: bool = False
    fail_under: float | None = None
    image: str | None = None
    accel: str = "auto"
    tools: tuple[str, ...] = DEFAULT_TOOLSETS
    max_steps: int | None = None
    agent_cmd: str | None = None
    max_turns: int = 50
    start: str = "auto"
    gate: str = "all"  # --fail-under over all tasks, or only the stable (non-flaky) ones
    agent_script: str = "ui_oracle.yaml"  # the scripted agent's script, per task
    record: bool = False  # each episode's screen to recording.mp4
    cluster: str | None = None  # a Ray cluster's address: run on its cu-run hosts (runner.cluster)
    selection: Path | None = None  # a selection.yaml of `cu-run tasks select`: its tasks, in its order
    mcp_server: str | None = None  # an external MCP server's command, started per episode ({vnc} filled in)
    mcp_server_url: str | None = None  # or its URL
    append_prompt: str = ""  # claude/codex: text after cu-run's system prompt (a vendor's skill text)
    agent_env: tuple[tuple[str, str], ...] = ()  # the agent's environment, over the runner's
    timeout_s: int | None = None  # every task's timeout_s, overridden (a study arm's)
    live: bool = False  # serve the live view (runner.live) while the pool runs
    live_port: int = 0
    live_host: str = "127.0.0.1"
    live_control: bool = False  # the live view may take the mouse and keyboard (recorded as interventions)
    model: str | None = None  # claude/codex: the model, passed to the CLI and recorded (None: the CLI's default)
    tags: TagFilter = TagFilter()  # --tags / --exclude-tags, when --tasks names none
    assets: Path | None = None  # imported tasks: the asset store (runner.benchmarks.assets); None: CU_RUN_ASSETS
    evaluators: str | None = None  # imported tasks: the metrics' source (runner.benchmarks.scoring_env)
    standby: bool = True  # with spare warm states, each slot's next VM is made ready ahead (runner.runs.standby)
    adds_tasks: bool = False  # a walk's baseline (tasks select): each resume adds the next batch's tasks




def episode_tasks(request: RunRequest, tasks: tuple[Task, ...]) -> tuple[Task, ...]:
    """TASKS as REQUEST runs them: --timeout overrides each task's timeout_s (a study arm's)."""
    if request.timeout_s is None:
        return tasks
    return tuple(replace(t, spec=t.spec.model_copy(update={"timeout_s": request.timeout_s})) for t in tasks)


def request_agent(request: RunRequest, tasks: tuple[Task, ...]) -> Agent:
    """The agent REQUEST names, made (and checked: its CLI, its key) for TASKS."""
    return make_agent(request.agent, tasks, command=request.agent_cmd, max_turns=request.max_turns,
                      script=request.agent_script, append_prompt=request.append_prompt, env=dict(request.agent_env),
                      model=request.model)


def external_server(request: RunRequest, agent: Agent) -> ExternalServer | None:
    """--mcp-server / --mcp-server-url as an ExternalServer, refused where it cannot apply."""
    if request.mcp_server is None and request.mcp_server_url is None:
        return None
    external = ExternalServer(request.mcp_server, request.mcp_server_url)
    external.preflight()
    if not agent.needs_mcp:
        raise UsageError(f"agent {agent.name} does not use MCP tools, so --mcp-server gives it nothing",
                         fix="use an MCP-driven agent: scripted, command, claude or codex")
    if tuple(request.tools) != DEFAULT_TOOLSETS:
        raise UsageError("--tools chooses among cu-run's own tools; an external MCP server brings its own",
                         fix="leave out --tools with --mcp-server")
    return external
