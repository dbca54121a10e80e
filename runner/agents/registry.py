"""The agents by name: what `--agent` chooses from."""

from __future__ import annotations

import importlib
import inspect

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
    if ":" in name:
        yours = imported_agent(name)
        yours.preflight(tasks)
        return yours
    if name not in AGENTS:
        raise UsageError(f"unknown agent {name!r}", fix=f"use one of: {', '.join(AGENTS)}, or MODULE:CLASS")
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


def imported_agent(path: str) -> Agent:
    """--agent MODULE:CLASS: an Agent subclass of the user's, importable from the runner's Python,
    made with no arguments (docs/mcp-and-agents.md)."""
    module_name, _, class_name = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"--agent {path}: cannot import {module_name!r}: {exc}",
                         fix="put its folder on PYTHONPATH, or install it into cu-run's environment") from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise UsageError(f"--agent {path}: {module_name} has no class {class_name!r} that subclasses "
                         "runner.agents.base.Agent", fix="see docs/mcp-and-agents.md, 'An agent of your own'")
    if inspect.isabstract(cls):
        raise UsageError(f"--agent {path}: {class_name} does not implement run()")
    agent = cls()
    if not getattr(agent, "name", None):
        agent.name = class_name
    return agent
