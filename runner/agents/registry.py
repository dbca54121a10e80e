"""The agents by name: what `--agent` chooses from."""

from __future__ import annotations

from runner.agents.base import Agent
from runner.agents.builtin import NopAgent, OracleAgent
from runner.agents.command import CommandAgent
from runner.agents.model_cli import ClaudeAgent, CodexAgent
from runner.agents.scripted import UI_ORACLE, ScriptedAgent
from runner.errors import UsageError
from runner.tasks.model import Task


AGENTS = {"oracle": OracleAgent, "nop": NopAgent, "scripted": ScriptedAgent, "command": CommandAgent,
          "claude": ClaudeAgent, "codex": CodexAgent}


def make_agent(name: str, tasks: tuple[Task, ...], *, command: str | None = None, max_turns: int = 50,
               script: str = UI_ORACLE, append_prompt: str = "", env: dict[str, str] | None = None,
               model: str | None = None) -> Agent:
    if name not in AGENTS:
        raise UsageError(f"unknown agent {name!r}", fix=f"use one of: {', '.join(AGENTS)}")
    if append_prompt and name not in ("claude", "codex"):
        raise UsageError(f"an appended system prompt is for the claude and codex agents, not {name}")
    if model and name not in ("claude", "codex"):
        raise UsageError(f"--model chooses the model of the claude and codex agents; {name} has none",
                         fix="drop --model, or tell your own agent its model through --agent-env")
    if name == "command":
        agent: Agent = CommandAgent(command, env=env)
    elif name in ("claude", "codex"):
        agent = AGENTS[name](max_turns, append_prompt=append_prompt, env=env, model=model)
    elif name == "scripted":
        agent = ScriptedAgent(script)
    else:
        agent = AGENTS[name]()
    agent.preflight(tasks)
    return agent
