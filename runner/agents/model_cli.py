"""Agent CLIs that reach a model (Claude Code, Codex), pointed at the episode's MCP server."""

from __future__ import annotations

import os
import shutil
import subprocess
from abc import abstractmethod
from collections.abc import Callable
from pathlib import Path

from runner.agents.base import Agent, AgentResult, agent_environment, run_process
from runner.agents.registry import AgentOptions, BuiltIn, register_agent
from runner.vm.episode import EpisodeVM
from runner.errors import UsageError
from runner.mcp.session import SERVER_NAME, McpSession
from runner.tasks.model import Task
from typing_extensions import override


AGENT_PREAMBLE = ("You operate a computer only through the cu-run MCP tools (screenshot, mouse, keyboard). "
                  "Start with a screenshot. When the task is done, stop.")
# Codex's features that give the model its own tools on the host (a shell, image files, sub-agents,
# a browser, its own computer use) or on the internet: each is turned off, so the VM is reached
# through cu-run's MCP server alone. Its read-only sandbox stays as a second wall.
CODEX_HOST_FEATURES = ("shell_tool", "unified_exec", "view_image", "multi_agent", "browser_use", "in_app_browser",
                       "computer_use", "apps", "image_generation", "goals")
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
    # The ways the CLI takes credentials, as it documents them: (what to tell a user, whether an
    # environment and a home folder hold that way). One must be set up.
    credentials: tuple[tuple[str, Callable[[dict[str, str], Path], bool]], ...]

    def __init__(self, max_turns: int = 50, append_prompt: str = "", env: dict[str, str] | None = None,
                 model: str | None = None) -> None:
        self.max_turns = max_turns
        self.append_prompt = append_prompt  # a study arm's vendor skill text, after cu-run's preamble
        self.env = env or {}  # a study arm's environment, over the runner's
        self.model = model  # None: the CLI's own default, recorded as such

    @property
    def system_prompt(self) -> str:
        return f"{AGENT_PREAMBLE}\n\n{self.append_prompt}" if self.append_prompt else AGENT_PREAMBLE

    def executable(self) -> str | None:
        return os.environ.get(self.bin_env) or shutil.which(self.binary)

    def _found_executable(self) -> str:
        """The CLI; a UsageError saying how to install it when there is none."""
        exe = self.executable()
        if not exe:
            raise UsageError(f"the {self.name} agent needs the {self.binary!r} CLI, which is not on PATH",
                             fix=f"install it, or point {self.bin_env} at it")
        return exe

    @override
    def preflight(self, tasks: tuple[Task, ...]) -> None:
        self._found_executable()
        env = {**os.environ, **self.env}
        if not any(found(env, Path.home()) for _what, found in self.credentials):
            raise UsageError(f"the {self.name} agent finds no credentials for its model",
                             fix="set up one of: " + "; ".join(what for what, _found in self.credentials))

    @override
    def version(self) -> str:
        exe = self.executable()
        if exe is None:
            return "unknown"
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
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


def _set(*names: str) -> Callable[[dict[str, str], Path], bool]:
    """Every one of NAMES is set (non-empty) in the environment."""
    return lambda env, _home: all(env.get(n) for n in names)


def _either(*names: str) -> Callable[[dict[str, str], Path], bool]:
    return lambda env, _home: any(env.get(n) for n in names)


def _on(name: str) -> Callable[[dict[str, str], Path], bool]:
    """A switch such as CLAUDE_CODE_USE_BEDROCK=1."""
    return lambda env, _home: env.get(name, "").strip().lower() in ("1", "true", "yes")


def _file(relative: str) -> Callable[[dict[str, str], Path], bool]:
    """A login the CLI saved in the home folder."""
    return lambda _env, home: (home / relative).is_file()


class ClaudeAgent(ModelCliAgent):
    """Claude Code headless: the stream-json transcript is agent.log."""

    name = "claude"
    binary = "claude"
    bin_env = "CU_RUN_CLAUDE_BIN"
    credentials = (
        ("an API key in ANTHROPIC_API_KEY", _set("ANTHROPIC_API_KEY")),
        ("a gateway: ANTHROPIC_BASE_URL with ANTHROPIC_AUTH_TOKEN", _set("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")),
        ("Amazon Bedrock: CLAUDE_CODE_USE_BEDROCK=1 with AWS credentials and AWS_REGION",
         _on("CLAUDE_CODE_USE_BEDROCK")),
        ("Google Vertex AI: CLAUDE_CODE_USE_VERTEX=1 with CLOUD_ML_REGION and ANTHROPIC_VERTEX_PROJECT_ID",
         _on("CLAUDE_CODE_USE_VERTEX")),
        ("a login saved by `claude` (~/.claude/.credentials.json)", _file(".claude/.credentials.json")),
    )

    @override
    def argv(self, task: Task, session: McpSession) -> list[str]:
        allowed = ",".join(f"mcp__{SERVER_NAME}__{name}" for name in session.tool_names)
        return [self._found_executable(), "-p", task.spec.instruction,
                *(["--model", self.model] if self.model else []),
                "--output-format", "stream-json", "--verbose",
                "--mcp-config", str(session.config_path), "--strict-mcp-config",
                # No built-in tool at all (`--tools ""`): the model is offered the episode's MCP tools
                # and nothing of the host's; the deny list stays for a CLI that offers one anyway.
                "--tools", "", "--allowedTools", allowed, "--disallowedTools", ",".join(DISALLOWED_HOST_TOOLS),
                "--max-turns", str(self.max_turns), "--append-system-prompt", self.system_prompt]


class CodexAgent(ModelCliAgent):
    """Codex CLI exec: the episode's server as an mcp_servers entry, its token read from the
    environment (Codex refuses inline tokens), a read-only sandbox; JSONL events are agent.log."""

    name = "codex"
    binary = "codex"
    bin_env = "CU_RUN_CODEX_BIN"
    credentials = (
        ("an API key in OPENAI_API_KEY or CODEX_API_KEY (a gateway: a model provider in ~/.codex/config.toml)",
         _either("OPENAI_API_KEY", "CODEX_API_KEY")),
        ("a login saved by `codex login` (~/.codex/auth.json)", _file(".codex/auth.json")),
    )

    @override
    def argv(self, task: Task, session: McpSession) -> list[str]:
        table = f"mcp_servers.{SERVER_NAME}"
        enabled = "[" + ",".join(f'"{name}"' for name in session.tool_names) + "]"
        host_tools_off = [arg for feature in CODEX_HOST_FEATURES for arg in ("-c", f"features.{feature}=false")]
        return [self._found_executable(), "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only",
                *(["--model", self.model] if self.model else []),
                *host_tools_off, "-c", 'web_search="disabled"',
                "-c", f'{table}.url="{session.url}"',
                "-c", f'{table}.bearer_token_env_var="CU_RUN_MCP_TOKEN"',
                "-c", f"{table}.enabled_tools={enabled}",
                # cu-run's server reaches only the episode's VM: its tools need no approval, which
                # `codex exec` (approval policy "never") would otherwise refuse every call for
                "-c", f'{table}.default_tools_approval_mode="approve"',
                f"{self.system_prompt}\n\n{task.spec.instruction}"]


def _maker(cli: type[ModelCliAgent]) -> Callable[[AgentOptions], Agent]:
    return lambda options: cli(options.max_turns, append_prompt=options.append_prompt, env=options.env,
                               model=options.model)


for _cli in (ClaudeAgent, CodexAgent):
    register_agent(BuiltIn(_cli.name, _maker(_cli), drives_a_model=True))
