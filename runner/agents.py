"""Agents: what acts on the VM between setup and verify.

An agent gets the episode's VM and task and returns how it ended; it never decides
pass or fail (the verifier does). A missing tool or key is found by preflight(),
before any VM starts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.episode import EpisodeVM
from runner.errors import CommandTimeout, UsageError
from runner.task_scripts import run_task_script
from runner.tasks import Task


@dataclass(frozen=True)
class AgentResult:
    ended: Literal["done", "timeout", "error"]
    reason: str = ""


class Agent(ABC):
    name: str

    def preflight(self) -> None:
        """Raises UsageError when the agent cannot run at all (missing CLI, missing key)."""

    @abstractmethod
    def run(self, vm: EpisodeVM, task: Task, log: Path) -> AgentResult:
        """Acts on VM for at most task.spec.timeout_s seconds, writing what it did to LOG.

        Raises InfraError only when the machinery broke, never for the agent's own failure.
        """

    def version(self) -> str:
        return "builtin"


class OracleAgent(Agent):
    """Runs the task's oracle script in the guest: proves the task solvable and the verifier right."""

    name = "oracle"

    def run(self, vm: EpisodeVM, task: Task, log: Path) -> AgentResult:
        try:
            result = run_task_script(vm.shell, task, "oracle", timeout=task.spec.timeout_s)
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

    def run(self, vm: EpisodeVM, task: Task, log: Path) -> AgentResult:
        log.write_text("nop: did nothing\n")
        return AgentResult("done")


AGENTS: dict[str, type[Agent]] = {"oracle": OracleAgent, "nop": NopAgent}


def make_agent(name: str) -> Agent:
    if name not in AGENTS:
        raise UsageError(f"unknown agent {name!r}", fix=f"use one of: {', '.join(AGENTS)}")
    agent = AGENTS[name]()
    agent.preflight()
    return agent
