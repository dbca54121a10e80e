"""The agents by name: what `--agent` chooses from."""

from __future__ import annotations

import importlib
import inspect

from collections.abc import Callable
from dataclasses import dataclass, field

from runner.agents.base import Agent
from runner.errors import UsageError
from runner.registry import Registry
from runner.tasks.model import Task

# The modules that register the built-in agents, each its own (loaded at the first lookup); the
# last is the audit's attacks (runner/audit/), agents of a layer above that register as a lab's would.
BUILT_IN = ("runner.agents.builtin", "runner.agents.scripted", "runner.agents.command", "runner.agents.model_cli",
            "runner.audit.attacks")
UI_ORACLE = "ui_oracle.yaml"  # the scripted agent's default script, in each task's folder


@dataclass(frozen=True)
class AgentOptions:
    """What the command line gives an agent: each built-in takes what applies to it."""

    command: str | None = None  # --agent-cmd
    max_turns: int = 50
    script: str = UI_ORACLE  # --agent-script
    append_prompt: str = ""
    env: dict[str, str] = field(default_factory=dict)  # --agent-env, a study arm's environment
    model: str | None = None


@dataclass(frozen=True)
class BuiltIn:
    """A built-in agent: its --agent name, how it is made, and whether it drives a model (only
    those take --model and an appended system prompt)."""

    name: str
    make: Callable[[AgentOptions], Agent]
    drives_a_model: bool = False


AGENTS: Registry[BuiltIn] = Registry(
    "agent", BUILT_IN, lambda entry: entry.name,
    lambda name, known: UsageError(f"unknown agent {name!r}", fix=f"use one of: {', '.join(known)}, or MODULE:CLASS"))
register_agent = AGENTS.register
unregister_agent = AGENTS.unregister
agent_names = AGENTS.names


def make_agent(name: str, tasks: tuple[Task, ...], *, command: str | None = None, max_turns: int = 50,
               script: str = UI_ORACLE, append_prompt: str = "", env: dict[str, str] | None = None,
               model: str | None = None) -> Agent:
    """The agent NAME (a built-in, or MODULE:CLASS), made and checked for TASKS."""
    if ":" in name:
        yours = imported_agent(name)
        yours.preflight(tasks)
        return yours
    entry = AGENTS.get(name)
    with_model = " and ".join(e.name for e in AGENTS.items() if e.drives_a_model)
    if append_prompt and not entry.drives_a_model:
        raise UsageError(f"an appended system prompt is for the {with_model} agents, not {name}")
    if model and not entry.drives_a_model:
        raise UsageError(f"--model chooses the model of the {with_model} agents; {name} has none",
                         fix="drop --model, or tell your own agent its model through --agent-env")
    agent = entry.make(AgentOptions(command, max_turns, script, append_prompt, dict(env or {}), model))
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
