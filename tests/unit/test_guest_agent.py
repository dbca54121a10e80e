"""The guest agent: its X property parsing (from recorded xprop/xwininfo output), and the
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

# Recorded from the linux-test guest (xprop 1.2.5, jwm) with mousepad open.
XPROP_ROOT = ("_NET_CLIENT_LIST(WINDOW): window id # 0x60000c, 0x800002\n"
              "_NET_ACTIVE_WINDOW(WINDOW): window id # 0x800002\n")
XPROP_XTERM = ('_NET_WM_NAME:  not found.\n'
               'WM_NAME(STRING) = "cu@cu-guest: ~"\n'
               'WM_CLASS(STRING) = "xterm", "XTerm"\n'
               '_NET_WM_PID(CARDINAL) = 298\n'
               '_NET_WM_STATE(ATOM) = \n')
XPROP_MOUSEPAD = ('_NET_WM_NAME(UTF8_STRING) = "notes \\"draft\\" – Mousepad"\n'
                  'WM_NAME(STRING) = "notes - Mousepad"\n'
                  'WM_CLASS(STRING) = "mousepad", "Mousepad"\n'
                  '_NET_WM_PID(CARDINAL) = 334\n'
                  '_NET_WM_STATE(ATOM) = _NET_WM_STATE_FOCUSED, _NET_WM_STATE_HIDDEN\n')
XWININFO = """
xwininfo: Window id: 0x800002 "Untitled 1 - Mousepad"

  Absolute upper-left X:  33
  Absolute upper-left Y:  51
  Relative upper-left X:  5
  Relative upper-left Y:  23
  Width: 640
  Height: 480
  Depth: 24
  Map State: IsViewable
"""


def test_window_ids_are_read_from_the_root_properties():
    lines = XPROP_ROOT.splitlines()
    assert agent_module.parse_window_ids(lines[0]) == ["0x60000c", "0x800002"]
    assert agent_module.parse_window_ids(lines[1]) == ["0x800002"]
    assert agent_module.parse_window_ids("_NET_ACTIVE_WINDOW:  not found.") == []


def test_properties_unquote_strings_and_skip_unset_ones():
    xterm = agent_module.parse_properties(XPROP_XTERM)
    assert "_NET_WM_NAME" not in xterm
    assert xterm["WM_CLASS"] == ["xterm", "XTerm"] and xterm["_NET_WM_PID"] == ["298"]
    assert xterm["_NET_WM_STATE"] == []
    mousepad = agent_module.parse_properties(XPROP_MOUSEPAD)
    assert mousepad["_NET_WM_NAME"] == ['notes "draft" – Mousepad']
    assert mousepad["_NET_WM_STATE"] == ["_NET_WM_STATE_FOCUSED", "_NET_WM_STATE_HIDDEN"]


def test_window_record_prefers_the_utf8_title_and_marks_the_active_window():
    geometry = agent_module.parse_geometry(XWININFO)
    assert geometry == {"x": 33, "y": 51, "width": 640, "height": 480}
    mousepad = agent_module.window_record("0x800002", agent_module.parse_properties(XPROP_MOUSEPAD), geometry,
                                          active="0x0800002")
    assert mousepad["title"] == 'notes "draft" – Mousepad' and mousepad["app"] == "Mousepad"
    assert mousepad["focused"] and mousepad["minimized"] and mousepad["pid"] == 334
    xterm = agent_module.window_record("0x60000c", agent_module.parse_properties(XPROP_XTERM), geometry,
                                       active="0x800002")
    assert xterm["title"] == "cu@cu-guest: ~" and not xterm["focused"] and not xterm["minimized"]


def test_geometry_missing_is_an_agent_error():
    with pytest.raises(agent_module.AgentError):
        agent_module.parse_geometry("xwininfo: error: no such window")


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
