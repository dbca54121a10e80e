"""The command agent: any executable, told the task and the episode's MCP server in its environment."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from runner.agents.base import Agent, AgentResult, agent_environment, run_process
from runner.agents.registry import BuiltIn, register_agent
from runner.vm.episode import EpisodeVM
from runner.errors import UsageError
from runner.mcp.session import McpSession
from runner.tasks.model import Task
from typing_extensions import override


class CommandAgent(Agent):
    """Any executable. It gets the task and the MCP server in its environment:

    CU_RUN_INSTRUCTION   the task's instruction
    CU_RUN_MCP_URL       streamable HTTP endpoint of the episode's MCP server
    CU_RUN_MCP_TOKEN     its bearer token (Authorization: Bearer ...)
    CU_RUN_MCP_CONFIG    a client config file ({"mcpServers": {"cu-run": {...}}})
    CU_RUN_MCP_TOOLS     the allowed tool names, comma-separated
    CU_RUN_TIMEOUT_S     the wall-clock limit

    Exit 0 is done; another exit code is an agent error; past the limit it is killed (timeout).
    """

    name = "command"
    needs_mcp = True

    def __init__(self, command: str | None, env: dict[str, str] | None = None) -> None:
        self.env = env or {}  # a study arm's environment, over the runner's
        if not command:
            raise UsageError("--agent command needs --agent-cmd 'EXECUTABLE ARGS...'")
        self.argv = shlex.split(command)

    @override
    def preflight(self, tasks: tuple[Task, ...]) -> None:
        exe = self.argv[0]
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)) and not shutil.which(exe):
            raise UsageError(f"the agent command {exe!r} is not an executable file or on PATH")

    @override
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        assert session is not None
        env = {**os.environ, **self.env, **agent_environment(task, session)}
        return run_process(self.argv, env, log, task.spec.timeout_s, cwd=log.parent)


register_agent(BuiltIn("command", lambda options: CommandAgent(options.command, env=options.env)))
