"""The real agent CLIs on a real VM: Claude Code and Codex from npm (installed by
scripts/setup-host.sh --test into the tests' cache), their API base pointed at a fake model on
loopback (tests/fake_model.py) that scripts a short conversation of tool calls. This is also the
gateway path a lab uses: a base URL and a token, no vendor account. Each CLI must load the
episode's MCP config, be offered cu-run's tools and not its own host tools, call the screen,
mouse and keyboard tools, and end with the task passed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fake_model import NAMESPACE, FakeModel, Say, ToolCall, Until, openai_tool_names
from vmtools import cu_run

from runner.agents.model_cli import DISALLOWED_HOST_TOOLS

TEST_HOME = Path(os.environ.get("CU_RUN_TEST_HOME") or Path.home() / ".cache" / "cu-run-tests").expanduser()
CLIS = TEST_HOME / "agent-clis" / "node_modules"
CLAUDE = CLIS / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
CODEX = CLIS / "@openai" / "codex-linux-x64" / "vendor" / "x86_64-unknown-linux-musl" / "bin" / "codex"
TASK = "folder-tree"
# folder-tree through the GUI, as a model would do it: focus the terminal on the desktop, wait
# for its focus in the window list, look, type the command, and wait for the terminal's title to
# show the folder it ends in (the keys reach the guest after the tool returns).
STEPS = [("computer_use_mouse_click", {"x": 200, "y": 150}),
         ("computer_use_windows", {}), ("computer_use_screenshot", {}),
         ("computer_use_keyboard_type",
          {"text": "mkdir -p ~/projects/alpha/docs ~/projects/beta/docs && cd ~/projects\n"}),
         ("computer_use_windows", {})]
TOOLS = "screen,mouse,keyboard,accessibility"


def script() -> list:
    click, windows, screenshot, type_, titles = (ToolCall(name, args) for name, args in STEPS)
    return [click, Until(windows, '"focused":true'), screenshot, type_, Until(titles, "~/projects"),
            Say("The folders are made.")]


def installed(binary: Path) -> Path:
    if not binary.is_file():
        pytest.fail(f"{binary} is missing: run scripts/setup-host.sh --test, which installs the agent CLIs from npm")
    return binary


def outcome(out: Path) -> dict:
    return json.loads((out / "results.jsonl").read_text().splitlines()[-1])


def test_claude_code_solves_a_task_through_cu_runs_tools(linux_image, tmp_path):
    home = tmp_path / "home"  # no settings, login or MCP servers of the user's
    home.mkdir()
    out = tmp_path / "run"
    with FakeModel(script()) as model:
        done = cu_run("run", "--suite", "linux-core", "--tasks", TASK, "--agent", "claude", "--model", "fake-model-1",
                      "--tools", TOOLS, "--out", str(out), timeout=1200,
                      env={"CU_RUN_CLAUDE_BIN": str(installed(CLAUDE)), "HOME": str(home),
                           "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_AUTH_TOKEN": "fake-gateway-token",
                           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert outcome(out)["outcome"] == "pass", outcome(out)
    turns = model.turns
    offered = {tool["name"] for tool in turns[0]["tools"]}
    assert {f"mcp__cu-run__{name}" for name, _ in STEPS} <= offered  # the episode's MCP config was loaded
    # cu-run's tools and none of Claude Code's own (Bash, Write, its sub-agents, ...); it adds a
    # reserved placeholder of its tool loading that has no input and does nothing
    others = [t for t in turns[0]["tools"] if not t["name"].startswith("mcp__cu-run__")]
    assert all(t["name"] == "DeferredToolPlaceholder" and not t["input_schema"].get("properties") for t in others), others
    assert not offered & set(DISALLOWED_HOST_TOOLS)
    assert {t["model"] for t in turns} == {"fake-model-1"}
    assert len(turns) >= len(STEPS) + 1  # each tool call's result came back, then the final text
    results = [block for message in turns[-1]["messages"] if isinstance(message["content"], list)
               for block in message["content"] if block.get("type") == "tool_result"]
    assert not any(r.get("is_error") for r in results), results
    screenshot = next(r["content"] for r in results if isinstance(r["content"], list))
    assert any(part.get("type") == "image" for part in screenshot), screenshot  # the VM's screen reached the model
    run = json.loads((out / "run.json").read_text())
    assert run["agent"]["model"] == "fake-model-1", run["agent"]


def test_codex_solves_a_task_through_cu_runs_tools(linux_image, tmp_path):
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    out = tmp_path / "run"
    with FakeModel(script()) as model:
        # a lab's gateway, as Codex takes one: a model provider in its config
        (home / ".codex" / "config.toml").write_text(
            'model_provider = "gateway"\n[model_providers.gateway]\nname = "lab gateway"\n'
            f'base_url = "{model.url}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
            "supports_websockets = false\n")
        done = cu_run("run", "--suite", "linux-core", "--tasks", TASK, "--agent", "codex", "--model", "fake-model-2",
                      "--tools", TOOLS, "--out", str(out), timeout=1200,
                      env={"CU_RUN_CODEX_BIN": str(installed(CODEX)), "HOME": str(home),
                           "OPENAI_API_KEY": "fake-gateway-token"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert outcome(out)["outcome"] == "pass", outcome(out)
    turns = model.turns
    offered = set(openai_tool_names(turns[0]["tools"]))
    assert {f"mcp__cu_run{NAMESPACE}{name}" for name, _ in STEPS} <= offered, offered  # its MCP config, loaded
    # none of Codex's own tools that reach the host (its shell, image files, sub-agents, the web):
    # what is left reads the configured MCP servers' resources (cu-run's only) or asks the user
    others = {name for name in offered if not name.startswith(f"mcp__cu_run{NAMESPACE}")}
    assert others <= {"list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource", "request_user_input"}, \
        others
    assert {t["model"] for t in turns} == {"fake-model-2"}
    assert len(turns) >= len(STEPS) + 1
