"""The built-in agents that need no model: the oracle (the task's own solution) and nop (nothing)."""

from __future__ import annotations

from pathlib import Path

from runner.agents.base import Agent, AgentResult
from runner.agents.registry import BuiltIn, register_agent
from runner.vm.episode import EpisodeVM
from runner.errors import CommandTimeout
from runner.mcp.session import McpSession
from runner.tasks.model import Task
from runner.tasks.scripts import run_as_agent
from typing_extensions import override


class OracleAgent(Agent):
    """Runs the task's oracle script in the guest: proves the task solvable and the verifier right."""

    name = "oracle"

    @override
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        try:
            result = run_as_agent(vm.shell, task, "oracle", timeout=task.spec.timeout_s)
        except CommandTimeout as exc:
            log.write_text(f"oracle timed out\n--- stdout\n{exc.stdout}\n--- stderr\n{exc.stderr}")
            return AgentResult("timeout", f"the oracle ran past {task.spec.timeout_s} s")
        if result is None:  # an imported task for which cu-run has no oracle yet
            log.write_text("the task has no oracle\n")
            return AgentResult("error", "the task has no oracle")
        log.write_text(f"exit {result.exit_code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
        if result.exit_code != 0:
            return AgentResult("error", f"the oracle exited {result.exit_code}: {result.stderr.strip()[-300:]}")
        return AgentResult("done")


class NopAgent(Agent):
    """Does nothing: every verifier must fail on an untouched guest."""

    name = "nop"

    @override
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        log.write_text("nop: did nothing\n")
        return AgentResult("done")


register_agent(BuiltIn("oracle", lambda _options: OracleAgent()))
register_agent(BuiltIn("nop", lambda _options: NopAgent()))
