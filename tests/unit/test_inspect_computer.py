"""Inspect's computer() tool as the `cu-run` sandbox serves it from a display (a fake one here:
the VNC display behind it is tested on a real VM in tests/e2e/test_inspect_sandbox.py), and the
sandbox's configuration."""

import base64

import pytest
from fakes.display import FakeDisplay

from runner.errors import UsageError
from runner.sandbox import computer

TOOL = ["python3", computer.COMPUTER_TOOL]


@pytest.fixture(autouse=True)
def no_settle(monkeypatch):
    monkeypatch.setattr(computer, "SETTLE_S", 0)


def test_only_inspects_command_is_served():
    assert computer.is_computer_tool(TOOL + ["screenshot"])
    assert computer.is_computer_tool(["/usr/bin/python3", computer.COMPUTER_TOOL, "screenshot"])
    assert not computer.is_computer_tool(["sh", "-c", f"python3 {computer.COMPUTER_TOOL} screenshot"])
    assert not computer.is_computer_tool(["python3", "/tmp/computer_tool.py", "screenshot"])


def test_actions_reach_the_display_and_return_the_screen():
    display = FakeDisplay(320, 200)
    answers = [computer.serve(display, args) for args in (
        ["left_click", "--coordinate", "10", "20"], ["double_click"], ["triple_click", "--coordinate", "5", "6"],
        ["right_click", "--coordinate", "7", "8"], ["left_click_drag", "--start_coordinate", "1", "2", "--coordinate", "3", "4"],
        ["scroll", "--scroll_amount", "2", "--scroll_direction", "up", "--coordinate", "9", "9"],
        ["key", "--text", "ctrl+Return Prior"], ["type", "--text=a b\n"], ["mouse_move", "--coordinate", "30", "40"])]
    assert display.calls == [
        ("click", 10, 20, "left", False), ("click", 10, 20, "left", True),  # a double click where the pointer is
        ("click", 5, 6, "left", True), ("click", 5, 6, "left", False), ("click", 7, 8, "right", False),
        ("drag", 1, 2, 3, 4, "left"), ("scroll", 9, 9, "up", 2), ("key", "Return", ("ctrl",)), ("key", "pageup", ()),
        ("type", "a b\n"), ("move", 30, 40)]
    assert all(base64.b64decode(a["base64_image"]).startswith(b"\x89PNG") for a in answers)
    assert computer.serve(display, ["cursor_position"]) == {"output": "X=30,Y=40"}


def test_what_cannot_be_served_is_an_error_the_model_sees():
    display = FakeDisplay()
    assert "not served" in computer.serve(display, ["zoom", "--region", "0", "0", "5", "5"])["error"]
    assert "needs --coordinate" in computer.serve(display, ["mouse_move"])["error"]
    assert "not a modifier" in computer.serve(display, ["key", "--text", "q+x"])["error"]
    assert "outside" in computer.serve(display, ["left_click", "--coordinate", "999", "999"])["error"]
    assert "invalid choice" in computer.serve(display, ["scroll", "--scroll_direction", "sideways"])["error"]
    assert display.calls == []


def test_the_guests_copy_of_the_tool_only_says_where_it_is_served():
    import json
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-c", computer.COMPUTER_TOOL_STUB], capture_output=True, text=True)
    assert "serves the computer tool" in json.loads(ran.stdout)["error"]


def test_the_sandbox_config_is_an_image_name_a_yaml_file_or_a_model(tmp_path):
    pytest.importorskip("inspect_ai")
    from runner.sandbox.provider import CuRunSandboxConfig, _options

    assert _options(None).image == "linux-test"
    # Inspect hands a string over resolved against the task's folder, as it would a compose file.
    assert _options(str(tmp_path / "linux-desktop")).image == "linux-desktop"
    config = tmp_path / "cu-run.yaml"
    config.write_text("image: linux-desktop\nstart: warm\nartifacts: /data/episodes\n")
    options = _options(str(config))
    assert (options.image, options.start, str(options.artifacts)) == ("linux-desktop", "warm", "/data/episodes")
    assert _options(CuRunSandboxConfig(image="x", accel="tcg")).accel == "tcg"
    config.write_text("net: replay\nassets: /data/assets\n")  # as `cu-run run --net replay --assets`
    options = _options(str(config))
    assert (options.net, str(options.assets), options.net_hosts) == ("replay", "/data/assets", None)
    assert _options(None).net == "live"
    # The network's files are the configuration's, found beside it as a task's beside the task.
    config.write_text("net: record\nnet_hosts: hosts.yaml\nassets: store\n")
    options = _options(str(config))
    assert (options.net_hosts, options.assets) == (tmp_path / "hosts.yaml", tmp_path / "store")
    config.write_text("net: record\nnet_host: hosts.yaml\n")  # a misspelt key: not silently a live proxy
    with pytest.raises(UsageError, match="not a cu-run sandbox configuration"):
        _options(str(config))
    config.write_text("net: sometimes\n")
    with pytest.raises(UsageError, match="not a cu-run sandbox configuration"):
        _options(str(config))
    config.write_text("start: sometimes\n")
    with pytest.raises(UsageError, match="not a cu-run sandbox configuration"):
        _options(str(config))


def test_cu_run_suite_is_an_inspect_task_of_the_suites_samples():
    pytest.importorskip("inspect_ai")
    from inspect_ai._util.registry import registry_lookup

    suite_task = registry_lookup("task", "cu_run/suite")
    assert suite_task is not None, "inspect eval cu_run/suite finds it through the entry point"
    task = suite_task(suite="linux-core", tasks=["folder-tree", "env-var"])
    assert [s.id for s in task.dataset] == ["folder-tree", "env-var"]
    sample = task.dataset[0]
    assert sample.metadata["cu_run_task"] == "folder-tree" and sample.metadata["cu_run_suite"] == "linux-core"
    assert "projects/alpha/docs" in sample.input
    assert task.sandbox.type == "cu-run" and task.sandbox.config.image == "linux-test"
    assert task.time_limit == 300
    with pytest.raises(UsageError, match="no task 'nope'"):
        suite_task(suite="linux-core", tasks="nope")
