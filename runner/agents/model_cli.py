"""Agent CLIs that reach a model (Claude Code, Codex), pointed at the episode's MCP server."""

from __future__ import annotations

import os
import shutil
import subprocess
from abc import abstractmethod
from pathlib import Path

from runner.agents.base import Agent, AgentResult, agent_environment, run_process
from runner.episode import EpisodeVM
from runner.errors import UsageError
from runner.mcp.session import SERVER_NAME, McpSession
from runner.tasks.model import Task
from typing_extensions import override


AGENT_PREAMBLE = ("You operate a computer only through the cu-run MCP tools (screenshot, mouse, keyboard). "
                  "Start with a screenshot. When the task is done, stop.")
DISALLOWED_HOST_TOOLS = ("Bash", "Edit", "MultiEdit", "Write", "Read", "Glob", "Grep", "LS", "NotebookEdit",
                         "NotebookRead", "WebFetch", "WebSearch", "Task", "TodoWrite")


class ModelCliAgent(Agent):
    """An agent CLI that reaches a model (Claude Code, Codex), pointed at the episode's MCP server.

    The CLI runs on the host, so every tool of its own that touches the host is denied:
    the VM is reached through MCP alone.
    """

    needs_mcp = True
    binary: str
    bin_env: str  # overrides where the executable is
    key_envs: tuple[str, ...]  # one of these must hold an API key

    def __init__(self, max_turns: int = 50, append_prompt: str = "", env: dict[str, str] | None = None) -> None:
        self.max_turns = max_turns
        self.append_prompt = append_prompt  # a study arm's vendor skill text, after cu-run's preamble
        self.env = env or {}  # a study arm's environment, over the runner's

    @property
    def system_prompt(self) -> str:
        return f"{AGENT_PREAMBLE}\n\n{self.append_prompt}" if self.append_prompt else AGENT_PREAMBLE

    def executable(self) -> str | None:
        return os.environ.get(self.bin_env) or shutil.which(self.binary)

    @override
    def preflight(self, tasks: tuple[Task, ...]) -> None:
        if not self.executable():
            raise UsageError(f"the {self.name} agent needs the {self.binary!r} CLI, which is not on PATH",
                             fix=f"install it, or point {self.bin_env} at it")
        if not any(os.environ.get(k) for k in self.key_envs):
            raise UsageError(f"the {self.name} agent needs an API key in {' or '.join(self.key_envs)}")

    @override
    def version(self) -> str:
        exe = self.executable()
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired, TypeError):
            return "unknown"
        return out.splitlines()[0] if out else "unknown"

    @abstractmethod
    def argv(self, task: Task, session: McpSession) -> list[str]:
        """The command line for one episode."""

    @override
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        assert session is not None
        env = {**os.environ, **self.env, **agent_environment(task, session)}
        return run_process(self.argv(task, session), env, log, task.spec.timeout_s, cwd=log.parent)


class ClaudeAgent(ModelCliAgent):
    """Claude Code headless: the stream-json transcript is agent.log."""

    name = "claude"
    binary = "claude"
    bin_env = "CU_RUN_CLAUDE_BIN"
    key_envs = ("ANTHROPIC_API_KEY",)

    @override
    def argv(self, task: Task, session: McpSession) -> list[str]:
        allowed = ",".join(f"mcp__{SERVER_NAME}__{name}" for name in session.tool_names)
        return [self.executable(), "-p", task.spec.instruction,
                "--output-format", "stream-json", "--verbose",
                "--mcp-config", str(session.config_path), "--strict-mcp-config",
                "--allowedTools", allowed, "--disallowedTools", ",".join(DISALLOWED_HOST_TOOLS),
                "--max-turns", str(self.max_turns), "--append-system-prompt", self.system_prompt]


class CodexAgent(ModelCliAgent):
    """Codex CLI exec: the episode's server as an mcp_servers entry, its token read from the
    environment (Codex refuses inline tokens), a read-only sandbox; JSONL events are agent.log."""

    name = "codex"
    binary = "codex"
    bin_env = "CU_RUN_CODEX_BIN"
    key_envs = ("OPENAI_API_KEY", "CODEX_API_KEY")

    @override
    def argv(self, task: Task, session: McpSession) -> list[str]:
        table = f"mcp_servers.{SERVER_NAME}"
        enabled = "[" + ",".join(f'"{name}"' for name in session.tool_names) + "]"
        return [self.executable(), "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only",
                "-c", f'{table}.url="{session.url}"',
                "-c", f'{table}.bearer_token_env_var="CU_RUN_MCP_TOKEN"',
                "-c", f"{table}.enabled_tools={enabled}",
                f"{self.system_prompt}\n\n{task.spec.instruction}"]
