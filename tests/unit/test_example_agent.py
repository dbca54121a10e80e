"""examples/agent.py, the agent program a lab starts from, run as `--agent command` runs it: against
an episode's MCP server (streamable HTTP, its bearer token) over a FakeDisplay."""

import os
import subprocess
import sys

import pytest

from fakes.display import FakeDisplay
from runner.config import PROJECT_ROOT
from runner.mcp.http import HttpMcpServer
from runner.mcp.server import build_server
from runner.sockets import free_port

AGENT = PROJECT_ROOT / "examples" / "agent.py"


def run_agent(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(AGENT)], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], **env})


def test_it_looks_types_what_the_instruction_quotes_and_stops():
    display = FakeDisplay(320, 200)
    with HttpMcpServer(build_server(display), free_port()) as http:
        done = run_agent({"CU_RUN_MCP_URL": http.url, "CU_RUN_MCP_TOKEN": http.token,
                          "CU_RUN_INSTRUCTION": 'In the terminal, type "echo hi > ~/out" and run it.'})
    assert done.returncode == 0, done.stderr
    assert "computer_use_screenshot" in done.stdout and "done after 2 actions" in done.stdout
    assert ("type", "echo hi > ~/out") in [call[:2] for call in display.calls]
    assert any(call[0] == "key" and call[1] in ("enter", "Return") for call in display.calls)


def test_a_wrong_token_or_no_server_is_an_agent_error_in_one_line():
    with HttpMcpServer(build_server(FakeDisplay()), free_port()) as http:
        refused = run_agent({"CU_RUN_MCP_URL": http.url, "CU_RUN_MCP_TOKEN": "wrong", "CU_RUN_INSTRUCTION": "x"})
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("the episode's MCP server refused or could not be reached")
    missing = run_agent({})
    assert missing.returncode == 2 and "CU_RUN_MCP_URL" in missing.stderr


def test_an_agent_class_by_import_path(tmp_path, monkeypatch):
    """--agent MODULE:CLASS makes the user's Agent subclass; the example types what is quoted."""
    from types import SimpleNamespace

    from runner.agents.registry import make_agent

    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "examples"))
    agent = make_agent("python_agent:ShellTypist", ())
    assert agent.name == "shell-typist"
    display = FakeDisplay()
    task = SimpleNamespace(spec=SimpleNamespace(instruction='Type "ls -la" in the terminal.'))
    result = agent.run(SimpleNamespace(display=display), task, tmp_path / "agent.log", None)
    assert result.ended == "done" and ("type", "ls -la") in display.calls


@pytest.mark.parametrize("path, said", [("no_such_module:Agent", "cannot import 'no_such_module'"),
                                        ("python_agent:Nothing", "has no class 'Nothing' that subclasses"),
                                        ("python_agent:re", "has no class 're' that subclasses")])
def test_an_agent_path_that_cannot_work_is_one_clear_error(monkeypatch, path, said):
    from runner.agents.registry import make_agent
    from runner.errors import UsageError

    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "examples"))
    with pytest.raises(UsageError, match=said):
        make_agent(path, ())
