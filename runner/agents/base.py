"""The Agent interface: what acts on the VM between setup and verify.

An agent gets the episode's VM and task (and, if it drives the GUI, an MCP session
bound to that VM) and returns how it ended; it never decides pass or fail (the
verifier does). A missing tool or key is found by preflight(), before any VM starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the contract names these; it needs none of them to run
    from runner.vm.episode import EpisodeVM
    from runner.mcp.session import McpSession
    from runner.tasks.model import Task


@dataclass(frozen=True)
class AgentResult:
    ended: Literal["done", "timeout", "error"]
    reason: str = ""


class Agent(ABC):
    name: str
    needs_mcp = False  # True: the scheduler hands run() an MCP session for the episode
    model: str | None = None  # the model behind the agent, where it has one and it was chosen (run.json records it)

    def preflight(self, tasks: tuple[Task, ...]) -> None:  # noqa: B027 - a hook with nothing to check by default
        """Raises UsageError when the agent cannot run these tasks at all (missing CLI, key, script)."""

    @abstractmethod
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        """Acts on VM for at most task.spec.timeout_s seconds, writing what it did to LOG.

        Raises InfraError only when the machinery broke, never for the agent's own failure.
        """

    def version(self) -> str:
        return "builtin"


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
