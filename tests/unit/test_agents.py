"""Agent adapters without a VM: the command agent's contract, preflight errors, ui_oracle files."""

import json
import stat
from pathlib import Path

import pytest

from runner.mcp.session import McpSession
from runner.agents.command import CommandAgent
from runner.agents.registry import make_agent
from runner.errors import UsageError
from runner.tasks.model import load_suite
from runner.mcp.trajectory import Trajectory

RECORDER = """#!/bin/sh
# A stand-in agent: records how it was called, then exits as told.
env | grep '^CU_RUN_' | sort > "$PWD/seen-env"
printf '%s\\n' "$@" > "$PWD/seen-args"
cat "$CU_RUN_MCP_CONFIG" > "$PWD/seen-config"
exit ${EXIT_WITH:-0}
"""


def stand_in(tmp_path: Path, body: str = RECORDER) -> Path:
    exe = tmp_path / "agent.sh"
    exe.write_text(body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def session(tmp_path: Path) -> McpSession:
    config = tmp_path / "mcp-config.json"
    config.write_text(json.dumps({"mcpServers": {"cu-run": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}))
    return McpSession("http://127.0.0.1:1/mcp", "tok123", config, ("computer_use_screenshot",), Trajectory(None))


def task():
    (t,) = load_suite("linux-core").select(["folder-tree"])
    return t


def test_command_agent_gets_instruction_and_mcp_in_its_environment(tmp_path):
    agent = make_agent("command", (task(),), command=f"{stand_in(tmp_path)} --model x")
    result = agent.run(None, task(), tmp_path / "agent.log", session(tmp_path))
    assert result.ended == "done"
    env = dict(line.split("=", 1) for line in (tmp_path / "seen-env").read_text().splitlines())
    assert env["CU_RUN_INSTRUCTION"] == task().spec.instruction
    assert env["CU_RUN_MCP_URL"] == "http://127.0.0.1:1/mcp" and env["CU_RUN_MCP_TOKEN"] == "tok123"
    assert env["CU_RUN_MCP_TOOLS"] == "computer_use_screenshot" and env["CU_RUN_TIMEOUT_S"] == "300"
    assert (tmp_path / "seen-args").read_text().split() == ["--model", "x"]
    assert "mcpServers" in (tmp_path / "seen-config").read_text()


def test_command_agent_exit_code_and_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("EXIT_WITH", "9")
    agent = CommandAgent(str(stand_in(tmp_path)))
    failed = agent.run(None, task(), tmp_path / "agent.log", session(tmp_path))
    assert failed.ended == "error" and "exited 9" in failed.reason

    sleeper = CommandAgent(str(stand_in(tmp_path, "#!/bin/sh\nsleep 30 &\nsleep 30\n")))
    slow = task().spec.model_copy(update={"timeout_s": 1})
    quick_task = type(task())(slow, task().folder)
    timed_out = sleeper.run(None, quick_task, tmp_path / "agent.log", session(tmp_path))
    assert timed_out.ended == "timeout"


def test_missing_command_is_refused_before_any_vm(tmp_path):
    with pytest.raises(UsageError, match="not an executable"):
        make_agent("command", (task(),), command=str(tmp_path / "nope"))
    with pytest.raises(UsageError, match="--agent-cmd"):
        make_agent("command", (task(),))
    with pytest.raises(UsageError, match="unknown agent"):
        make_agent("gpt", (task(),))


def test_scripted_agent_needs_a_ui_oracle_for_every_task():
    suite = load_suite("linux-core")
    make_agent("scripted", suite.select(["editor-write-save", "folder-tree", "calc-to-file"]))
    with pytest.raises(UsageError, match="env-var"):
        make_agent("scripted", suite.select(["folder-tree", "env-var"]))


@pytest.mark.parametrize("name,bin_env,key_env", [("claude", "CU_RUN_CLAUDE_BIN", "ANTHROPIC_API_KEY"),
                                                   ("codex", "CU_RUN_CODEX_BIN", "OPENAI_API_KEY")])
def test_model_cli_without_cli_or_key_is_refused_before_any_vm(tmp_path, monkeypatch, name, bin_env, key_env):
    for var in CREDENTIAL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no saved login either
    monkeypatch.setenv("PATH", str(tmp_path))  # no claude or codex here
    monkeypatch.delenv(bin_env, raising=False)
    with pytest.raises(UsageError, match="not on PATH"):
        make_agent(name, (task(),))
    monkeypatch.setenv(bin_env, str(stand_in(tmp_path)))
    with pytest.raises(UsageError, match=key_env):
        make_agent(name, (task(),))
    monkeypatch.setenv(key_env, "sk-test")
    assert make_agent(name, (task(),)).name == name


def test_claude_gets_the_episode_config_only_the_vm_tools_and_limits(tmp_path, monkeypatch):
    monkeypatch.setenv("CU_RUN_CLAUDE_BIN", str(stand_in(tmp_path)))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    agent = make_agent("claude", (task(),), max_turns=7)
    result = agent.run(None, task(), tmp_path / "agent.log", session(tmp_path))
    assert result.ended == "done"
    args = (tmp_path / "seen-args").read_text().splitlines()
    assert args[:2] == ["-p", task().spec.instruction]
    assert args[args.index("--output-format") + 1] == "stream-json" and "--verbose" in args
    assert args[args.index("--mcp-config") + 1] == str(tmp_path / "mcp-config.json")
    assert "--strict-mcp-config" in args
    assert args[args.index("--allowedTools") + 1] == "mcp__cu-run__computer_use_screenshot"
    assert args[args.index("--tools") + 1] == ""  # no built-in tool: the host is out of reach
    assert "Bash" in args[args.index("--disallowedTools") + 1].split(",")
    assert args[args.index("--max-turns") + 1] == "7"


def test_codex_gets_the_server_in_its_config_and_the_token_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("CU_RUN_CODEX_BIN", str(stand_in(tmp_path)))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = make_agent("codex", (task(),))
    assert agent.run(None, task(), tmp_path / "agent.log", session(tmp_path)).ended == "done"
    args = (tmp_path / "seen-args").read_text().split("\n")
    assert args[:2] == ["exec", "--json"] and "--skip-git-repo-check" in args
    assert args[args.index("--sandbox") + 1] == "read-only"
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "-c"]
    assert 'mcp_servers.cu-run.url="http://127.0.0.1:1/mcp"' in overrides
    assert 'mcp_servers.cu-run.bearer_token_env_var="CU_RUN_MCP_TOKEN"' in overrides
    assert 'mcp_servers.cu-run.enabled_tools=["computer_use_screenshot"]' in overrides
    assert task().spec.instruction in "\n".join(args)
    env = dict(line.split("=", 1) for line in (tmp_path / "seen-env").read_text().splitlines())
    assert env["CU_RUN_MCP_TOKEN"] == "tok123"


CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_USE_BEDROCK",
                   "CLAUDE_CODE_USE_VERTEX", "OPENAI_API_KEY", "CODEX_API_KEY")


@pytest.mark.parametrize("name, setting", [
    ("claude", {"ANTHROPIC_BASE_URL": "http://gateway.lab:8080", "ANTHROPIC_AUTH_TOKEN": "lab-token"}),
    ("claude", {"CLAUDE_CODE_USE_BEDROCK": "1"}),
    ("claude", {"CLAUDE_CODE_USE_VERTEX": "true"}),
    ("claude", {"saved": ".claude/.credentials.json"}),
    ("codex", {"CODEX_API_KEY": "k"}),
    ("codex", {"saved": ".codex/auth.json"}),
])
def test_credentials_are_taken_the_ways_the_clis_take_them(tmp_path, monkeypatch, name, setting):
    """A lab's gateway, Bedrock or Vertex, or a saved login: not only an API key."""
    for var in CREDENTIAL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(f"CU_RUN_{name.upper()}_BIN", str(stand_in(tmp_path)))
    with pytest.raises(UsageError) as info:
        make_agent(name, (task(),))
    assert "no credentials" in info.value.message and "set up one of:" in info.value.fix
    if "saved" in setting:
        (tmp_path / setting["saved"]).parent.mkdir(parents=True)
        (tmp_path / setting["saved"]).write_text("{}")
    else:
        for key, value in setting.items():
            monkeypatch.setenv(key, value)
    assert make_agent(name, (task(),)).name == name


def test_a_gateway_set_in_agent_env_counts(tmp_path, monkeypatch):
    for var in CREDENTIAL_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CU_RUN_CLAUDE_BIN", str(stand_in(tmp_path)))
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_AUTH_TOKEN": "t"}
    assert make_agent("claude", (task(),), env=env).env == env


@pytest.mark.parametrize("name, flag", [("claude", "--model"), ("codex", "--model")])
def test_the_model_reaches_the_cli(tmp_path, monkeypatch, name, flag):
    monkeypatch.setenv(f"CU_RUN_{name.upper()}_BIN", str(stand_in(tmp_path)))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = make_agent(name, (task(),), model="lab-model-7")
    assert agent.model == "lab-model-7"
    agent.run(None, task(), tmp_path / "agent.log", session(tmp_path))
    args = (tmp_path / "seen-args").read_text().split("\n")
    assert args[args.index(flag) + 1] == "lab-model-7"


def test_a_model_for_an_agent_without_one_is_refused():
    with pytest.raises(UsageError, match="--model chooses the model of the claude and codex agents"):
        make_agent("oracle", (task(),), model="x")
