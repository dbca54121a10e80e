"""One registry of built-in agents (runner/agents/registry.py): a new built-in agent is one module
that registers itself. A throwaway agent, registered here and nowhere else, is accepted by
--agent, listed in the help, made by make_agent, and refused the options it does not take."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from runner.agents.builtin import NopAgent
from runner.agents.registry import BuiltIn, agent_names, make_agent, register_agent, unregister_agent
from runner.cli import app
from runner.errors import UsageError


class ToyAgent(NopAgent):
    name = "toyagent"

    def __init__(self, script: str) -> None:
        self.script = script


@pytest.fixture
def toyagent():
    entry = register_agent(BuiltIn("toyagent", lambda options: ToyAgent(options.script)))
    yield entry
    unregister_agent("toyagent")


def test_an_agent_registered_by_one_module_is_made_and_chosen_by_name(toyagent):
    assert agent_names()[-1] == "toyagent" and agent_names()[:2] == ("oracle", "nop")
    agent = make_agent("toyagent", (), script="misbehave.yaml")
    assert isinstance(agent, ToyAgent) and agent.script == "misbehave.yaml"
    # --agent takes it: the run gets as far as the agent's options, which it refuses.
    result = CliRunner().invoke(app, ["run", "--suite", "linux-core", "--agent", "toyagent", "--model", "m1"])
    assert isinstance(result.exception, UsageError), result.output  # the CLI's handler makes it exit 1
    assert "--model chooses the model of the claude and codex agents; toyagent has none" in str(result.exception)
    with pytest.raises(UsageError, match="appended system prompt is for the claude and codex agents, not toyagent"):
        make_agent("toyagent", (), append_prompt="be brief")


def test_without_its_registration_the_name_is_unknown():
    result = CliRunner().invoke(app, ["run", "--suite", "linux-core", "--agent", "toyagent"])
    assert result.exit_code == 2 and "'toyagent' is not an agent: use one of oracle, nop," in result.output
    with pytest.raises(UsageError, match="unknown agent 'toyagent'"):
        make_agent("toyagent", ())


def test_a_name_is_registered_once(toyagent):
    with pytest.raises(ValueError, match="registered twice"):
        register_agent(BuiltIn("toyagent", lambda _options: NopAgent()))
