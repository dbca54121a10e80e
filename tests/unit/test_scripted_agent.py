"""The scripted agent over a real MCP HTTP server, with fakes at the display and the guest agent.

What a condition sees follows what the script does: typing a command "opens" the editor in the
fake window list, a click puts a dot on the fake screen.
"""

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from PIL import Image

from fakes.display import FakeDisplay, LocalShell
from runner.profiles import PROFILES
from runner.mcp.session import McpSession
from runner.agents.scripted import ScriptedAgent
from runner.sockets import free_port
from runner.errors import UsageError
from runner.mcp.http import HttpMcpServer
from runner.mcp.server import build_server
from runner.tasks.model import load_suite
from runner.mcp.trajectory import RecordingDisplay, Trajectory
from runner.agents.ui_script import SleepStep, ToolStep, WaitStep, load_ui_script
from typing_extensions import override

TERMINAL = {"id": "0x1", "title": "cu@cu-guest: ~", "app": "XTerm", "focused": True,
            "geometry": {"x": 0, "y": 0, "width": 100, "height": 100}}
EDITOR = {**TERMINAL, "id": "0x2", "title": "fox.txt - Mousepad", "app": "Mousepad"}


class DesktopDisplay(FakeDisplay):
    """A fake screen that shows the last click as a dot, and whose typing of 'mousepad'
    puts a focused editor into the fake guest agent's window list."""

    def __init__(self, windows_file: Path) -> None:
        super().__init__(320, 200)
        self.windows_file = windows_file
        self.windows_file.write_text(json.dumps({"windows": [TERMINAL]}))

    @override
    def screenshot(self) -> bytes:
        image = Image.new("RGB", (self.size.width, self.size.height), "#1f6f8b")
        if self.calls and self.calls[-1][0] == "click":
            image.putpixel(self.calls[-1][1:3], (255, 255, 255))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()

    @override
    def type(self, text, *, delay=None):
        super().type(text, delay=delay)
        if text.startswith("mousepad"):
            self.windows_file.write_text(json.dumps({"windows": [{**TERMINAL, "focused": False}, EDITOR]}))


def episode(tmp_path: Path, script: str, *, guest_agent: bool = True, timeout_s: int = 60):
    """A one-task suite with SCRIPT as its ui_oracle.yaml, a fake VM, and an MCP session over it."""
    folder = tmp_path / "suite" / "t"
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(f"id: t\ninstruction: x\nprofile: linux\ntimeout_s: {timeout_s}\n")
    (folder / "verify.sh").write_text("echo PASS\n")
    (folder / "oracle.sh").write_text("true\n")
    (folder / "ui_oracle.yaml").write_text(script)
    (task,) = load_suite(str(tmp_path / "suite")).select(None)
    windows = tmp_path / "windows.json"
    display = DesktopDisplay(windows)
    agent_cmd = f"cat {windows}; :" if guest_agent else None
    vm = SimpleNamespace(display=display, shell=LocalShell(),
                         image=SimpleNamespace(manifest=SimpleNamespace(guest_agent=agent_cmd,
                                                                        guest=PROFILES["linux"])))
    return task, vm, display


def drive(tmp_path: Path, task, vm, display):
    trajectory = Trajectory(tmp_path / "ep")
    with HttpMcpServer(build_server(RecordingDisplay(display, trajectory)), free_port()) as http:
        session = McpSession(http.url, http.token, tmp_path / "cfg.json", (), trajectory)
        return ScriptedAgent().run(vm, task, tmp_path / "ep" / "agent.log", session)


def test_waits_for_the_focus_before_typing_and_for_the_screen_after_a_click(tmp_path):
    task, vm, display = episode(tmp_path, """
- {tool: computer_use_keyboard_type, args: {text: "mousepad ~/fox.txt &\\n"}}
- wait_for: {focused: Mousepad, timeout: 10}
- {tool: computer_use_keyboard_type, args: {text: "hello"}}
- {tool: computer_use_mouse_click, args: {x: 50, y: 60}}
- wait_for: {screen_changes: true, region: {x: 40, y: 50, width: 20, height: 20}, timeout: 5}
""")
    result = drive(tmp_path, task, vm, display)
    assert result.ended == "done", result.reason
    assert [c[0] for c in display.calls] == ["type", "type", "click"]
    log = (tmp_path / "ep" / "agent.log").read_text()
    assert "2: the focus on a window like 'Mousepad' after" in log
    assert "5: the screen to change in (40, 50, 20x20) after" in log
    # Conditions look, they do not act: only the three tool calls are trajectory steps.
    steps = (tmp_path / "ep" / "trajectory.jsonl").read_text().splitlines()
    assert [json.loads(s)["action"] for s in steps] == ["type", "type", "click"]


def test_a_condition_that_never_holds_is_an_agent_error_with_a_screenshot(tmp_path):
    task, vm, display = episode(tmp_path, """
- {tool: computer_use_keyboard_type, args: {text: "galculator &\\n"}}
- wait_for: {focused: alculator, timeout: 1.5}
- {tool: computer_use_mouse_click, args: {x: 5, y: 5}}
""")
    result = drive(tmp_path, task, vm, display)
    assert result.ended == "error"
    assert result.reason.startswith("step 2: waited 1.5 s for the focus on a window like 'alculator'")
    assert "'cu@cu-guest: ~' (XTerm, focused)" in result.reason
    assert (tmp_path / "ep" / "gave-up.png").read_bytes()[:4] == b"\x89PNG"
    assert [c[0] for c in display.calls] == ["type"]  # nothing after the failed wait


def test_a_wait_longer_than_the_episode_has_left_is_a_timeout(tmp_path):
    task, vm, display = episode(tmp_path, "- wait_for: {screen_changes: true, timeout: 600}\n", timeout_s=2)
    result = drive(tmp_path, task, vm, display)
    assert result.ended == "timeout" and "while step 1 waited for the screen to change" in result.reason


def test_window_conditions_without_a_guest_agent_say_so(tmp_path):
    task, vm, display = episode(tmp_path, "- wait_for: {window: x}\n", guest_agent=False)
    result = drive(tmp_path, task, vm, display)
    assert result.ended == "error" and "need the image's guest agent" in result.reason


def test_the_file_format(tmp_path):
    path = tmp_path / "ui.yaml"
    path.write_text("- {tool: a, args: {x: 1}}\n- wait_for: {window: b, timeout: 5}\n- wait: 0.5\n- tool: c\n")
    steps = load_ui_script(path)
    assert [type(s) for s in steps] == [ToolStep, WaitStep, SleepStep, ToolStep]
    assert steps[1].wait_for.timeout == 5 and steps[3].args == {}


@pytest.mark.parametrize("text,message", [
    ("{}", "expected a list"),
    ("[]", "expected a list"),
    ("- {tool: a, wait: 1}", "exactly one of"),
    ("- {args: {x: 1}}", "exactly one of"),
    ("- {tool: a, args: [1]}", "'args' must be a mapping"),
    ("- [unclosed", "not valid YAML"),
    ("- {wait_for: {focused: a, window: b}}", r"step 1 \(wait_for\): wait_for: .*exactly one of"),
    ("- {tool: a}\n- {wait_for: {focused: a, timeout: 0}}", r"step 2 \(wait_for\): wait_for.timeout"),
    ("- {wait: -1}", r"step 1 \(wait\): wait: Input should be greater than 0"),
    ("- {tool: a, extra: 1}", r"step 1 \(tool\): extra: Extra inputs"),
])
def test_bad_ui_scripts_name_the_file_and_the_step(tmp_path, text, message):
    path = tmp_path / "ui_oracle.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_ui_script(path)
