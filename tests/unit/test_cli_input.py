"""Bad command-line input: one message naming the flag, before any work; messages print literally."""

import os
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


def shown_help(*args: str) -> str:
    """`cu-run ARGS --help` as a person sees it, its lines joined."""
    result = subprocess.run([sys.executable, "-m", "runner", *args, "--help"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "COLUMNS": "400"})
    return " ".join(result.stdout.replace("│", " ").split())


def test_the_help_names_the_agents_and_images_there_are():
    from runner.agents.registry import agent_names
    from runner.images.builders import builder_names

    from runner.audit.attacks import PREFIX, battery_names
    from runner.cli.options import ATTACK_PREFIX

    assert ATTACK_PREFIX == PREFIX
    agents = ("oracle", "nop", "scripted", "command", "claude", "codex")
    assert f"who acts on the VM: {', '.join(agents)}, attack-NAME (the audit's attacks), or MODULE:CLASS" \
        in shown_help("run")
    assert agent_names() == agents + tuple(PREFIX + a for a in battery_names())
    assert f"the image to build: {', '.join(builder_names())}" in shown_help("image", "build")


def test_a_command_that_shows_no_help_imports_no_agent_or_image_builder():
    # The help lists come from the registries, which import every agent and image builder
    # (a second at start-up); only --help pays for that.
    loaded = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['cu-run', '--version']; import runner.cli; "
                             "print(sorted(m for m in sys.modules if m in ('runner.agents.model_cli', "
                             "'runner.agents.scripted', 'runner.images.windows_11', 'runner.images.linux_images')))"],
                            capture_output=True, text=True, timeout=120)
    assert loaded.stdout.strip() == "[]", loaded.stdout + loaded.stderr


def test_counts_below_one_fail_at_parse_time_naming_the_flag():
    for flag in ("--vm-pool", "--trials", "--max-steps"):
        result = cu_run("run", "--suite", "linux-core", "--agent", "nop", flag, "0")
        assert result.returncode == 2 and f"'{flag}'" in result.stderr


@pytest.mark.parametrize("tasks", ["", ",", " , "])
def test_an_empty_task_list_is_refused_not_read_as_every_task(tasks):
    for command in (["run", "--suite", "linux-core", "--agent", "nop"], ["validate", "--suite", "linux-core"]):
        result = cu_run(*command, "--tasks", tasks)
        assert result.returncode == 2 and "'--tasks'" in result.stderr and "names no task" in result.stderr, result.stderr


def test_help_shows_the_defaults_written_in_it():
    """Rich once read `[default: ...]` in a help text as markup and dropped it."""
    import os

    shown = subprocess.run([sys.executable, "-m", "runner", "run", "--help"], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "COLUMNS": "300"}).stdout
    shown = " ".join(shown.split())  # the help wraps its column at any width
    for default in ("[default: all]", "[default: by the suite's profile]", "[default: ~/.cache/cu-run]",
                    "[default: qemu:///system]", "[default: runs/<suite>-<agent>-<time>]"):
        assert default in shown, default


def test_version():
    from runner import __version__

    result = cu_run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"cu-run {__version__}"


def test_run_takes_what_a_study_arm_sets_and_refuses_what_cannot_apply():
    bad_env = cu_run("run", "--suite", "linux-core", "--agent", "nop", "--agent-env", "NOEQUALS")
    assert bad_env.returncode == 2 and "'--agent-env'" in bad_env.stderr and "KEY=VALUE" in bad_env.stderr
    model = cu_run("run", "--suite", "linux-core", "--agent", "nop", "--model", "m1")
    assert model.returncode == 1 and "--model chooses the model of the claude and codex agents" in model.stderr
    prompt = cu_run("run", "--suite", "linux-core", "--agent", "nop", "--append-prompt", "be brief")
    assert prompt.returncode == 1 and "appended system prompt is for the claude and codex agents" in prompt.stderr


def test_an_image_cu_run_cannot_build_is_refused_listing_those_it_can():
    result = cu_run("image", "build", "windows-12")
    assert result.returncode == 2 and "linux-test, linux-desktop, windows-11" in result.stderr
    assert "Value error" not in result.stderr


def test_a_missing_image_gets_a_fix_that_can_work(tmp_path):
    from runner.images.builders import image_named
    from runner.images.catalog import Catalog
    from runner.errors import UsageError

    with pytest.raises(UsageError) as info:
        image_named(Catalog(tmp_path), "nope")
    assert "cu-run image build nope" not in info.value.fix and "linux-desktop, windows-11" in info.value.fix
    with pytest.raises(UsageError) as info:
        image_named(Catalog(tmp_path), "linux-desktop")
    assert info.value.fix == "build it: cu-run image build linux-desktop"


def test_the_readmes_exit_code_table_is_the_codes_the_cli_uses():
    import re

    from runner.config import PROJECT_ROOT
    from runner.errors import ExitCode

    readme = (PROJECT_ROOT / "README.md").read_text()
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", readme, flags=re.M))
    assert sorted(map(int, table)) == sorted(code.value for code in ExitCode)
    assert "misspelt option" in table["2"] and "infrastructure" in table["3"] and "interrupted" in table["130"]
