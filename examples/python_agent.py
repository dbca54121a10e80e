"""An agent as a Python class: `cu-run run --agent python_agent:ShellTypist` (with examples/ on
PYTHONPATH). The class subclasses runner.agents.base.Agent and implements run(); cu-run makes it with
no arguments, once per run, and calls run() once per episode (docs/mcp-and-agents.md).

run() gets the episode's VM, its task, where to write its log, and the episode's MCP session
(session.url, session.token, session.tool_names) when needs_mcp is True. This one drives the VM's
display directly: it types the text the instruction quotes, then Enter. A real agent asks its
model what to do, through the MCP session or the display.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.agents.base import Agent, AgentResult


class ShellTypist(Agent):
    name = "shell-typist"
    needs_mcp = False  # this one uses vm.display itself; set True to be handed the MCP session

    def run(self, vm, task, log: Path, session) -> AgentResult:
        quoted = re.findall(r'"([^"]+)"', task.spec.instruction)
        if not quoted:
            log.write_text("nothing quoted in the instruction: nothing to type\n")
            return AgentResult("error", "the instruction quotes no text to type")
        vm.display.type(quoted[0])
        vm.display.key("enter")
        log.write_text(f"typed {quoted[0]!r} and Enter\n")
        return AgentResult("done")
