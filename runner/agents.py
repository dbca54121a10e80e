"""Agents: what acts on the VM between setup and verify.

An agent gets the episode's VM and task (and, if it drives the GUI, an MCP session
bound to that VM) and returns how it ended; it never decides pass or fail (the
verifier does). A missing tool or key is found by preflight(), before any VM starts.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from runner.agent_session import SERVER_NAME, McpSession
from runner.conditions import ConditionTimeout, DisplayObserver, wait_for
from runner.episode import EpisodeVM
from runner.errors import CommandTimeout, CuRunError, UsageError
from runner.guest.agent import GuestAgent
from runner.task_scripts import run_as_agent
from runner.tasks import Task
from runner.ui_script import SleepStep, Step, ToolStep, WaitStep, baseline_needed, load_ui_script

UI_ORACLE = "ui_oracle.yaml"


@dataclass(frozen=True)
class AgentResult:
    ended: Literal["done", "timeout", "error"]
    reason: str = ""


class Agent(ABC):
    name: str
    needs_mcp = False  # True: the harness hands run() an MCP session for the episode

    def preflight(self, tasks: tuple[Task, ...]) -> None:
        """Raises UsageError when the agent cannot run these tasks at all (missing CLI, key, script)."""

    @abstractmethod
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        """Acts on VM for at most task.spec.timeout_s seconds, writing what it did to LOG.

        Raises InfraError only when the machinery broke, never for the agent's own failure.
        """

    def version(self) -> str:
        return "builtin"


class OracleAgent(Agent):
    """Runs the task's oracle script in the guest: proves the task solvable and the verifier right."""

    name = "oracle"

    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        try:
            result = run_as_agent(vm.shell, task, "oracle", timeout=task.spec.timeout_s)
        except CommandTimeout as exc:
            log.write_text(f"oracle timed out\n--- stdout\n{exc.stdout}\n--- stderr\n{exc.stderr}")
            return AgentResult("timeout", f"the oracle ran past {task.spec.timeout_s} s")
        assert result is not None  # every task has an oracle (checked when loaded)
        log.write_text(f"exit {result.exit_code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
        if result.exit_code != 0:
            return AgentResult("error", f"the oracle exited {result.exit_code}: {result.stderr.strip()[-300:]}")
        return AgentResult("done")


class NopAgent(Agent):
    """Does nothing: every verifier must fail on an untouched guest."""

    name = "nop"

    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        log.write_text("nop: did nothing\n")
        return AgentResult("done")


class ScriptedAgent(Agent):
    """A real MCP client that solves a task through the GUI tools only, following the task's
    ui_oracle.yaml (runner.ui_script): tool calls, conditions to wait for, and rare fixed pauses.
    It proves the GUI path works end to end and catches regressions in it.

    Conditions look at the screen and the window list directly, not through MCP: like a
    person watching, they are not steps of the trajectory and count against no step limit.
    """

    name = "scripted"
    needs_mcp = True

    def __init__(self, script: str = UI_ORACLE) -> None:
        # Another script than the solution (--agent-script) plays a misbehaving agent: one that
        # also breaks something, or obeys a planted instruction, to prove the checks catch it.
        self.script = script

    def preflight(self, tasks: tuple[Task, ...]) -> None:
        missing = [t.id for t in tasks if not (t.folder / self.script).is_file()]
        if missing:
            raise UsageError(f"the scripted agent needs {self.script} in every task; missing in: {', '.join(missing)}",
                             fix="pick tasks that have one with --tasks")
        for t in tasks:
            load_ui_script(t.folder / self.script)

    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        assert session is not None
        steps = load_ui_script(task.folder / self.script)
        command = vm.image.manifest.guest_agent
        observer = DisplayObserver(vm.display, GuestAgent(vm.shell, command) if command else None)
        lines: list[str] = []
        try:
            result = anyio.run(self._drive, session, observer, steps, lines, task.spec.timeout_s)
            if result.ended != "done":
                try:  # what the screen showed when the script gave up
                    (log.parent / "gave-up.png").write_bytes(observer.screenshot())
                except CuRunError as exc:
                    lines.append(f"no screenshot of where it gave up: {exc}")
        finally:
            log.write_text("\n".join(lines) + "\n")
        return result

    async def _drive(self, session: McpSession, observer: DisplayObserver, steps: list[Step], lines: list[str],
                     timeout: float) -> AgentResult:
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {session.token}"}, timeout=60)
        deadline = time.monotonic() + timeout
        baseline: bytes | None = None
        try:
            with anyio.fail_after(timeout):
                async with Client(streamable_http_client(session.url, http_client=http)) as client:
                    for number, step in enumerate(steps, 1):
                        if isinstance(step, SleepStep):
                            await anyio.sleep(step.wait)
                            lines.append(f"{number}: paused {step.wait:g} s")
                        elif isinstance(step, WaitStep):
                            ended = await self._wait(number, step, observer, baseline, deadline, lines)
                            if ended is not None:
                                return ended
                        else:
                            if baseline_needed(steps, number - 1):
                                baseline = await anyio.to_thread.run_sync(observer.screenshot)
                            ended = await self._call(number, step, client, lines)
                            if ended is not None:
                                return ended
        except TimeoutError:
            return AgentResult("timeout", f"the script ran past {timeout} s")
        finally:
            await http.aclose()
        return AgentResult("done")

    @staticmethod
    async def _call(number: int, step: ToolStep, client: Client, lines: list[str]) -> AgentResult | None:
        result = await client.call_tool(step.tool, step.args)
        text = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
        lines.append(f"{number}: {step.tool} {step.args} -> "
                     f"{'ERROR ' if result.is_error else ''}{text or result.content[0].type}")
        if result.is_error:
            return AgentResult("error", f"step {number} ({step.tool}) failed: {text}")
        return None

    @staticmethod
    async def _wait(number: int, step: WaitStep, observer: DisplayObserver, baseline: bytes | None,
                    deadline: float, lines: list[str]) -> AgentResult | None:
        """Waits for the step's condition, within what is left of the episode's time: the wait
        runs in a thread, which the episode's own limit cannot cancel."""
        left = deadline - time.monotonic()
        condition = step.wait_for
        capped = condition.timeout > left
        if capped:
            condition = condition.model_copy(update={"timeout": max(0.1, left)})
        try:
            waited = await anyio.to_thread.run_sync(
                lambda: wait_for(condition, observer, baseline=baseline))
        except ConditionTimeout as exc:
            lines.append(f"{number}: gave up: {exc.message}")
            if capped:
                return AgentResult("timeout", f"the script ran past its time while step {number} waited for "
                                              f"{condition.describe()}")
            return AgentResult("error", f"step {number}: {exc.message}")
        except (UsageError, ValueError) as exc:
            lines.append(f"{number}: cannot wait: {exc}")
            return AgentResult("error", f"step {number}: {exc}")
        lines.append(f"{number}: {condition.describe()} after {waited.seconds:g} s ({waited.polls} looks)")
        return None


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

    def __init__(self, command: str | None) -> None:
        if not command:
            raise UsageError("--agent command needs --agent-cmd 'EXECUTABLE ARGS...'")
        self.argv = shlex.split(command)

    def preflight(self, tasks: tuple[Task, ...]) -> None:
        exe = self.argv[0]
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)) and not shutil.which(exe):
            raise UsageError(f"the agent command {exe!r} is not an executable file or on PATH")

    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        assert session is not None
        env = {**os.environ, **agent_environment(task, session)}
        return run_process(self.argv, env, log, task.spec.timeout_s, cwd=log.parent)


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

    def __init__(self, max_turns: int = 50) -> None:
        self.max_turns = max_turns

    def executable(self) -> str | None:
        return os.environ.get(self.bin_env) or shutil.which(self.binary)

    def preflight(self, tasks: tuple[Task, ...]) -> None:
        if not self.executable():
            raise UsageError(f"the {self.name} agent needs the {self.binary!r} CLI, which is not on PATH",
                             fix=f"install it, or point {self.bin_env} at it")
        if not any(os.environ.get(k) for k in self.key_envs):
            raise UsageError(f"the {self.name} agent needs an API key in {' or '.join(self.key_envs)}")

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

    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        assert session is not None
        env = {**os.environ, **agent_environment(task, session)}
        return run_process(self.argv(task, session), env, log, task.spec.timeout_s, cwd=log.parent)


class ClaudeAgent(ModelCliAgent):
    """Claude Code headless: the stream-json transcript is agent.log."""

    name = "claude"
    binary = "claude"
    bin_env = "CU_RUN_CLAUDE_BIN"
    key_envs = ("ANTHROPIC_API_KEY",)

    def argv(self, task: Task, session: McpSession) -> list[str]:
        allowed = ",".join(f"mcp__{SERVER_NAME}__{name}" for name in session.tool_names)
        return [self.executable(), "-p", task.spec.instruction,
                "--output-format", "stream-json", "--verbose",
                "--mcp-config", str(session.config_path), "--strict-mcp-config",
                "--allowedTools", allowed, "--disallowedTools", ",".join(DISALLOWED_HOST_TOOLS),
                "--max-turns", str(self.max_turns), "--append-system-prompt", AGENT_PREAMBLE]


class CodexAgent(ModelCliAgent):
    """Codex CLI exec: the episode's server as an mcp_servers entry, its token read from the
    environment (Codex refuses inline tokens), a read-only sandbox; JSONL events are agent.log."""

    name = "codex"
    binary = "codex"
    bin_env = "CU_RUN_CODEX_BIN"
    key_envs = ("OPENAI_API_KEY", "CODEX_API_KEY")

    def argv(self, task: Task, session: McpSession) -> list[str]:
        table = f"mcp_servers.{SERVER_NAME}"
        enabled = "[" + ",".join(f'"{name}"' for name in session.tool_names) + "]"
        return [self.executable(), "exec", "--json", "--skip-git-repo-check", "--sandbox", "read-only",
                "-c", f'{table}.url="{session.url}"',
                "-c", f'{table}.bearer_token_env_var="CU_RUN_MCP_TOKEN"',
                "-c", f"{table}.enabled_tools={enabled}",
                f"{AGENT_PREAMBLE}\n\n{task.spec.instruction}"]


def agent_environment(task: Task, session: McpSession) -> dict[str, str]:
    return {"CU_RUN_INSTRUCTION": task.spec.instruction, "CU_RUN_MCP_URL": session.url,
            "CU_RUN_MCP_TOKEN": session.token, "CU_RUN_MCP_CONFIG": str(session.config_path),
            "CU_RUN_MCP_TOOLS": ",".join(session.tool_names), "CU_RUN_TIMEOUT_S": str(task.spec.timeout_s)}


def run_process(argv: list[str], env: dict[str, str], log: Path, timeout: float, cwd: Path) -> AgentResult:
    """Runs an agent process in its own process group, output to LOG; kills the group at TIMEOUT."""
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return AgentResult("timeout", f"the agent ran past {timeout} s and was killed")
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if code != 0:
        return AgentResult("error", f"the agent exited {code} (see agent.log)")
    return AgentResult("done")


AGENTS = {"oracle": OracleAgent, "nop": NopAgent, "scripted": ScriptedAgent, "command": CommandAgent,
          "claude": ClaudeAgent, "codex": CodexAgent}


def make_agent(name: str, tasks: tuple[Task, ...], *, command: str | None = None, max_turns: int = 50,
               script: str = UI_ORACLE) -> Agent:
    if name not in AGENTS:
        raise UsageError(f"unknown agent {name!r}", fix=f"use one of: {', '.join(AGENTS)}")
    if name == "command":
        agent: Agent = CommandAgent(command)
    elif name in ("claude", "codex"):
        agent = AGENTS[name](max_turns)
    elif name == "scripted":
        agent = ScriptedAgent(script)
    else:
        agent = AGENTS[name]()
    agent.preflight(tasks)
    return agent
