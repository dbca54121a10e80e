"""What every episode of a run is made from, each out of the part of the request it reads: the
same functions on this machine (runner.runs.run_plan, the scope's pool_for) and on a cluster's
hosts, so an option that changes an episode reaches it wherever it runs.

A cluster run sends the RunRequest itself to each host (runner.cluster.host_service.RunOrder);
the host applies it with these and the scope's `pool_for`, as a local run does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from runner.agents.base import Agent
from runner.agents.registry import make_agent
from runner.assets import assets_root
from runner.errors import UsageError
from runner.mcp.proxy import ExternalServer
from runner.mcp.toolsets import DEFAULT_TOOLSETS
from runner.network.settings import NetHosts, NetSettings
from runner.runs.request import AgentSetup, HowToRun, Work
from runner.tasks.model import Task


def net_settings(how: HowToRun, assets: Path | None) -> NetSettings:
    """What a run's networked episodes share: --net, --net-hosts (read and checked), the asset store ASSETS."""
    hosts = NetHosts.load(how.net_hosts) if how.net_hosts is not None else None
    return NetSettings(how.net, assets_root(assets), hosts)


def episode_tasks(work: Work, tasks: tuple[Task, ...]) -> tuple[Task, ...]:
    """TASKS as WORK runs them: --timeout overrides each task's timeout_s (a study arm's)."""
    if work.timeout_s is None:
        return tasks
    return tuple(replace(t, spec=t.spec.model_copy(update={"timeout_s": work.timeout_s})) for t in tasks)


def request_agent(setup: AgentSetup, tasks: tuple[Task, ...]) -> Agent:
    """The agent SETUP names, made (and checked: its CLI, its key) for TASKS."""
    return make_agent(setup.name, tasks, command=setup.agent_cmd, max_turns=setup.max_turns, script=setup.agent_script,
                      append_prompt=setup.append_prompt, env=dict(setup.agent_env), model=setup.model)


def external_server(setup: AgentSetup, agent: Agent) -> ExternalServer | None:
    """--mcp-server / --mcp-server-url as an ExternalServer, refused where it cannot apply."""
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
