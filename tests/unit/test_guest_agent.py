"""The guest agent: how it reads X properties into its window records, and the
host side's handling of what it answers, through the MCP tools."""

import importlib.util
import json
import shlex
import sys

import pytest

from fakes.display import FakeDisplay, LocalShell
from runner.config import PROJECT_ROOT
from runner.errors import UsageError
from runner.guest.agent import GuestAgent, GuestAgentError
from runner.mcp.server import build_server
from test_mcp_server import call, tool_names

AGENT_PATH = PROJECT_ROOT / "guest_agent" / "linux" / "cu_guest_agent.py"
spec = importlib.util.spec_from_file_location("cu_guest_agent", AGENT_PATH)
agent_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(agent_module)

ATOMS = {301: "_NET_WM_STATE_FOCUSED", 302: "_NET_WM_STATE_HIDDEN"}


def strings(kind: str, fmt: int, value) -> list[str]:
    return agent_module.property_strings(kind, fmt, value, ATOMS.__getitem__)


def test_text_properties_split_at_their_nuls_in_their_encoding():
    assert strings("STRING", 8, b"xterm\0XTerm\0") == ["xterm", "XTerm"]  # WM_CLASS: instance, class
    assert strings("STRING", 8, b"caf\xe9") == ["caf\xe9"]  # STRING is Latin-1
    assert strings("UTF8_STRING", 8, 'notes "draft" \u2013 Mousepad'.encode()) == ['notes "draft" \u2013 Mousepad']
    assert strings("UTF8_STRING", 8, b"") == []


def test_atoms_are_named_and_numbers_kept():
    assert strings("ATOM", 32, [301, 302]) == ["_NET_WM_STATE_FOCUSED", "_NET_WM_STATE_HIDDEN"]
    assert strings("ATOM", 32, []) == []
    assert strings("CARDINAL", 32, [334]) == ["334"]
    assert strings("WINDOW", 32, [0x60000C, 0x800002]) == [str(0x60000C), str(0x800002)]


def test_window_record_prefers_the_utf8_title_and_marks_the_active_window():
    geometry = {"x": 33, "y": 51, "width": 640, "height": 480}
    mousepad_props = {"_NET_WM_NAME": strings("UTF8_STRING", 8, 'notes "draft" \u2013 Mousepad'.encode()),
                      "WM_NAME": ["notes - Mousepad"], "WM_CLASS": ["mousepad", "Mousepad"],
                      "_NET_WM_PID": ["334"], "_NET_WM_STATE": strings("ATOM", 32, [301, 302])}
    mousepad = agent_module.window_record("0x800002", mousepad_props, geometry, active="0x0800002")
    assert mousepad["title"] == 'notes "draft" \u2013 Mousepad' and mousepad["app"] == "Mousepad"
    assert mousepad["focused"] and mousepad["minimized"] and mousepad["pid"] == 334
    xterm_props = {"WM_NAME": ["cu@cu-guest: ~"], "WM_CLASS": ["xterm", "XTerm"], "_NET_WM_STATE": []}
    xterm = agent_module.window_record("0x60000c", xterm_props, geometry, active="0x800002")
    assert xterm["title"] == "cu@cu-guest: ~" and not xterm["focused"] and not xterm["minimized"]
    assert xterm["pid"] is None and xterm["geometry"] == geometry


def test_without_an_x_server_the_window_list_is_an_agent_error(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":97")  # no X server listens there
    with pytest.raises(agent_module.AgentError, match="cannot (open the X display|load libX11)"):
        agent_module.list_windows()


def test_arguments_are_read_as_the_usage_says():
    assert agent_module.parse_args(["windows"]) == ("windows", {})
    assert agent_module.parse_args(["tree", "--app", "mousepad", "--max-nodes", "9"]) == \
        ("tree", {"app": "mousepad", "max_depth": 20, "max_nodes": 9})
    for wrong in ([], ["look"], ["windows", "--app", "x"], ["tree", "--max-depth"], ["tree", "--max-depth", "x"],
                  ["tree", "--colour", "red"]):
        with pytest.raises(agent_module.AgentError, match="usage: cu-guest-agent"):
            agent_module.parse_args(wrong)


def test_the_real_agent_answers_ping_and_refuses_without_a_display(tmp_path):
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT_PATH))}"
    assert GuestAgent(LocalShell(), command).ping() == 1
    with pytest.raises(GuestAgentError, match="DISPLAY is not set"):
        GuestAgent(LocalShell(), f"env -u DISPLAY {command}").windows()


def fake_agent(tmp_path, answers: dict[str, str], exit_code: int = 0) -> GuestAgent:
    """A stand-in guest agent: a shell script that prints a canned answer per command."""
    script = tmp_path / "fake-agent.sh"
    cases = "".join(f"  {name}) cat <<'EOF'\n{text}\nEOF\n  ;;\n" for name, text in answers.items())
    script.write_text(f'case "$1" in\n{cases}esac\necho "fake agent failed" >&2\nexit {exit_code}\n'
                      if exit_code else f'case "$1" in\n{cases}esac\n')
    return GuestAgent(LocalShell(), f"sh {script}")


WINDOWS = {"windows": [{"id": "0x1", "title": "terminal", "app": "XTerm", "pid": 7, "focused": True,
                        "minimized": False, "geometry": {"x": 1, "y": 2, "width": 30, "height": 40}}]}
TREE = {"role": "desktop", "name": "", "truncated": False, "children": [
    {"role": "application", "name": "mousepad", "children": [
        {"role": "push button", "name": "Save", "bounds": [10, 20, 30, 40], "states": ["focused"]}]}]}


def test_accessibility_tools_return_the_agents_answer(tmp_path):
    agent = fake_agent(tmp_path, {"windows": json.dumps(WINDOWS), "tree": json.dumps(TREE)})
    server = build_server(FakeDisplay(), LocalShell(), toolsets=("screen", "accessibility"), guest_agent=agent)
    assert {"computer_use_windows", "computer_use_accessibility_tree"} <= set(tool_names(server))
    windows, tree, bad = call(server, ("computer_use_windows", {}),
                              ("computer_use_accessibility_tree", {"app": "mousepad", "max_depth": 5}),
                              ("computer_use_accessibility_tree", {"max_depth": 0}))
    assert json.loads(windows.content[0].text) == WINDOWS
    button = json.loads(tree.content[0].text)["children"][0]["children"][0]
    assert button == {"role": "push button", "name": "Save", "bounds": [10, 20, 30, 40], "states": ["focused"]}
    assert bad.is_error and "max_depth" in bad.content[0].text


@pytest.mark.parametrize("answer, exit_code, message", [
    ("not json at all", 0, "is not JSON"),
    ('{"windows": [{"title": "no id"}]}', 0, "malformed"),
    ('["windows"]', 0, "the answer is list, not an object"),
    ("", 2, "fake agent failed"),
])
def test_a_broken_agent_is_a_readable_tool_error(tmp_path, answer, exit_code, message):
    agent = fake_agent(tmp_path, {"windows": answer}, exit_code=exit_code)
    server = build_server(FakeDisplay(), LocalShell(), toolsets=("accessibility",), guest_agent=agent)
    (result, after) = call(server, ("computer_use_windows", {}), ("computer_use_windows", {}))
    assert result.is_error and message in result.content[0].text
    assert after.is_error  # the server still serves


def test_accessibility_tools_need_a_guest_agent():
    with pytest.raises(UsageError, match="guest agent"):
        build_server(FakeDisplay(), LocalShell(), toolsets=("accessibility",))
    assert "computer_use_windows" not in tool_names(build_server(FakeDisplay()))
