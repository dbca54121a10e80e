"""Bad command-line input: one message naming the flag, before any work; messages print literally."""

import subprocess
import sys

import pytest


def cu_run(*args: str, env_home=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, flag", [
    (["run", "--suite", "linux-core", "--agent", "oracle", "--start", "wram"], "--start"),
    (["run", "--suite", "linux-core", "--agent", "oracle", "--accel", "kvn"], "--accel"),
    (["run", "--suite", "linux-core", "--agent", "oracle", "--gate", "stabel"], "--gate"),
    (["validate", "--suite", "linux-core", "--start", "hot"], "--start"),
])
def test_a_misspelt_choice_fails_at_parse_time_naming_the_flag(args, flag):
    result = cu_run(*args)
    assert result.returncode == 2 and f"'{flag}'" in result.stderr and "Traceback" not in result.stderr


def test_error_messages_print_literally(tmp_path):
    """A task id that looks like rich markup, and pydantic's [type=...] details, reach the user whole."""
    task = tmp_path / "suite" / "t"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text("id: '[/x]'\ninstruction: x\nprofile: linux\n")
    (task / "verify.sh").write_text("echo PASS\n")
    (task / "oracle.sh").write_text("true\n")
    result = cu_run("run", "--suite", str(tmp_path / "suite"), "--agent", "oracle")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "'[/x]'" in result.stderr and "field 'id'" in result.stderr


def test_the_agent_choices_are_the_agents_there_are():
    from runner.agents.registry import AGENTS
    from runner.cli.options import AgentChoice

    assert [a.value for a in AgentChoice] == list(AGENTS)


def test_counts_below_one_fail_at_parse_time_naming_the_flag():
    for flag in ("--vm-pool", "--trials", "--max-steps"):
        result = cu_run("run", "--suite", "linux-core", "--agent", "nop", flag, "0")
        assert result.returncode == 2 and f"'{flag}'" in result.stderr
