"""The MCP server through the SDK's own in-process client, on a FakeDisplay and a LocalShell."""

import io
import json

import anyio
import pytest
from mcp import Client
from PIL import Image

from fakes.display import FakeDisplay, LocalShell
from runner.profiles import get_profile
from runner.errors import UsageError
from runner.mcp.server import DEFAULT_TOOLSETS, TOOLSETS, build_server, resolve_toolsets
from runner.mcp.trajectory import RecordingDisplay, Trajectory


def call(server, *calls):
    """Runs (tool, args) calls in one client session; returns their results."""
    async def go():
        async with Client(server) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def tool_names(server):
    async def go():
        async with Client(server) as client:
            return sorted(t.name for t in (await client.list_tools()).tools)

    return anyio.run(go)


def image_of(result) -> Image.Image:
    (content,) = result.content
    assert content.type == "image"
    import base64
    return Image.open(io.BytesIO(base64.b64decode(content.data)))


def test_default_tools_are_screen_mouse_keyboard_only():
    names = tool_names(build_server(FakeDisplay()))
    assert names == sorted(t for s in DEFAULT_TOOLSETS for t in TOOLSETS[s])
    assert "list_files" not in names and "file_download" not in names


def test_screenshot_is_image_content_of_the_screen_size_and_scales():
    png, jpeg = call(build_server(FakeDisplay(320, 200)),
                     ("computer_use_screenshot", {}),
                     ("computer_use_screenshot", {"scale": 0.5, "format": "jpeg", "quality": 50}))
    assert not png.is_error and image_of(png).size == (320, 200) and image_of(png).format == "PNG"
    assert image_of(jpeg).size == (160, 100) and image_of(jpeg).format == "JPEG"
    assert png.content[0].mime_type == "image/png"


def test_region_crops_and_refuses_outside_the_screen():
    inside, outside = call(build_server(FakeDisplay(320, 200)),
                           ("computer_use_screenshot_region", {"x": 10, "y": 10, "width": 50, "height": 30}),
                           ("computer_use_screenshot_region", {"x": 300, "y": 10, "width": 50, "height": 30}))
    region = image_of(inside)
    assert region.size == (50, 30) and region.convert("RGB").getpixel((5, 5)) == (255, 255, 255)
    assert outside.is_error and "not inside" in outside.content[0].text


def test_actions_reach_the_display():
    display = FakeDisplay()
    results = call(build_server(display),
                   ("computer_use_mouse_click", {"x": 5, "y": 6, "button": "right", "double": True}),
                   ("computer_use_mouse_drag", {"start_x": 1, "start_y": 2, "end_x": 30, "end_y": 40}),
                   ("computer_use_mouse_scroll", {"x": 9, "y": 9, "direction": "up", "amount": 2}),
                   ("computer_use_keyboard_type", {"text": "Hi_there>\n"}),
                   ("computer_use_keyboard_press", {"key": "tab", "modifiers": ["alt"]}),
                   ("computer_use_keyboard_hotkey", {"keys": "ctrl+shift+s"}),
                   ("computer_use_mouse_position", {}),
                   ("computer_use_display_info", {}))
    assert not any(r.is_error for r in results), [r.content for r in results if r.is_error]
    assert display.calls == [("click", 5, 6, "right", True), ("drag", 1, 2, 30, 40, "left"),
                             ("scroll", 9, 9, "up", 2), ("type", "Hi_there>\n"), ("key", "tab", ("alt",)),
                             ("key", "s", ("ctrl", "shift"))]
    assert json.loads(results[-2].content[0].text) == {"x": 5, "y": 6}
    assert json.loads(results[-1].content[0].text) == {"width": 320, "height": 200}


@pytest.mark.parametrize("name,args,message", [
    ("computer_use_mouse_click", {"x": 5000, "y": 1}, "outside"),
    ("computer_use_mouse_click", {"x": 1, "y": 1, "button": "side"}, "button"),
    ("computer_use_mouse_move", {"x": -1, "y": 1}, "outside"),
    ("computer_use_keyboard_press", {"key": "nosuchkey"}, "unknown key"),
    ("computer_use_keyboard_hotkey", {"keys": "ctrl+"}, "bad hotkey"),
    ("computer_use_keyboard_type", {"text": "caf\u00e9"}, "cannot type"),
    ("computer_use_screenshot", {"scale": 3}, "scale"),
    ("computer_use_mouse_scroll", {"x": 1, "y": 1, "direction": "sideways"}, "direction"),
    ("computer_use_keyboard_press", {"key": "m", "modifiers": ["r"]}, "'r' is not a modifier"),
    ("computer_use_keyboard_press", {"key": "t", "modifiers": ["ctrl", "enter"]}, "'enter' is not a modifier"),
    ("computer_use_keyboard_hotkey", {"keys": "r+m"}, "'r' in 'r+m' is not a modifier"),
    ("computer_use_keyboard_hotkey", {"keys": "ctrl+space+t"}, "is not a modifier"),
])
def test_bad_calls_are_tool_errors_and_nothing_is_sent(name, args, message):
    display = FakeDisplay()
    server = build_server(display)
    (result,) = call(server, (name, args))
    assert result.is_error and message in result.content[0].text
    assert display.calls == []
    # the server is still serving
    (again,) = call(server, ("computer_use_display_info", {}))
    assert not again.is_error


def test_trajectory_records_every_call_and_saves_screenshots(tmp_path):
    trajectory = Trajectory(tmp_path)
    server = build_server(RecordingDisplay(FakeDisplay(), trajectory))
    call(server, ("computer_use_screenshot", {}), ("computer_use_mouse_click", {"x": 3, "y": 4}),
         ("computer_use_keyboard_type", {"text": "abc"}), ("computer_use_keyboard_press", {"key": "a"}))
    lines = [json.loads(l) for l in (tmp_path / "trajectory.jsonl").read_text().splitlines()]
    assert [l["tool"] for l in lines] == ["computer_use_screenshot", "computer_use_mouse_click",
                                          "computer_use_keyboard_type", "computer_use_keyboard_press"]
    assert [l["step"] for l in lines] == [1, 2, 3, 4]
    assert lines[0]["screenshot"] == "step-0001.png" and (tmp_path / "step-0001.png").read_bytes()[:4] == b"\x89PNG"
    assert lines[1]["arguments"] == {"x": 3, "y": 4, "button": "left", "double": False}
    assert all({"time", "duration_s", "result"} <= set(l) for l in lines)


def test_step_limit_refuses_further_calls(tmp_path):
    trajectory = Trajectory(tmp_path, max_steps=2)
    server = build_server(RecordingDisplay(FakeDisplay(), trajectory))
    results = call(server, *[("computer_use_mouse_move", {"x": 1, "y": 1})] * 3)
    assert [r.is_error for r in results] == [False, False, True]
    assert "step limit (2)" in results[2].content[0].text
    assert trajectory.limit_reached and trajectory.steps == 2


def test_file_tools_are_confined_to_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "note.txt").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("no")
    (root / "escape").symlink_to(tmp_path / "secret.txt")
    server = build_server(FakeDisplay(), LocalShell(), toolsets=("screen", "files"), file_root=str(root),
                          guest=get_profile("linux"))
    listing, note, up, link, missing = call(
        server, ("list_files", {}), ("file_download", {"path": "note.txt"}), ("list_files", {"path": "../"}),
        ("file_download", {"path": "escape"}), ("file_download", {"path": "nope.txt"}))
    assert not listing.is_error and "note.txt" in listing.content[0].text and "\tsub" in listing.content[0].text
    assert note.content[0].text == "hello\n"
    assert up.is_error and "outside" in up.content[0].text
    assert link.is_error and "outside" in link.content[0].text
    assert missing.is_error and "does not exist" in missing.content[0].text


def test_file_tools_need_a_root_and_unknown_sets_are_refused():
    with pytest.raises(UsageError):
        build_server(FakeDisplay(), LocalShell(), toolsets=("files",))
    with pytest.raises(UsageError, match="unknown tool set"):
        resolve_toolsets(("everything",))


# -- arguments refused before anything is recorded or sent (trust issue)

HUGE = 10**30


@pytest.mark.parametrize("name,args,message", [
    ("computer_use_mouse_click", {"x": HUGE, "y": 1}, "outside the 320x200 screen"),
    ("computer_use_mouse_click", {"x": 1, "y": -HUGE, "button": "middle"}, "outside"),
    ("computer_use_mouse_move", {"x": 320, "y": 0}, "outside"),
    ("computer_use_mouse_drag", {"start_x": 1, "start_y": 1, "end_x": 1, "end_y": HUGE}, "outside"),
    ("computer_use_mouse_drag", {"start_x": -1, "start_y": 1, "end_x": 1, "end_y": 1}, "outside"),
    ("computer_use_mouse_scroll", {"x": HUGE, "y": 1}, "outside"),
    ("computer_use_mouse_scroll", {"x": 1, "y": 1, "amount": HUGE}, "1 to 50"),
    ("computer_use_mouse_scroll", {"x": 1, "y": 1, "amount": 0}, "1 to 50"),
    ("computer_use_keyboard_type", {"text": "ok", "delay": HUGE}, "0 to 500"),
    ("computer_use_keyboard_type", {"text": "rm \u00e9"}, "cannot type"),
    ("computer_use_keyboard_press", {"key": "x" * 10_000}, "unknown key"),
    ("computer_use_keyboard_press", {"key": "m", "modifiers": ["ctrl", "r"]}, "not a modifier"),
])
def test_a_bad_argument_is_refused_before_it_is_recorded(tmp_path, name, args, message):
    display = FakeDisplay(320, 200)
    (result,) = call(build_server(RecordingDisplay(display, Trajectory(tmp_path))), (name, args))
    assert result.is_error and message in result.content[0].text
    assert len(result.content[0].text) < 2000  # an agent's argument is quoted short
    assert display.calls == [] and not (tmp_path / "trajectory.jsonl").exists()


def test_modifiers_are_held_by_one_name_each():
    display = FakeDisplay()
    results = call(build_server(display),
                   ("computer_use_keyboard_press", {"key": "t", "modifiers": ["Control_R", "ctrl", "ALT", "win_l"]}),
                   ("computer_use_keyboard_hotkey", {"keys": "control+Shift_L+t"}))
    assert not any(r.is_error for r in results)
    assert display.calls == [("key", "t", ("ctrl", "alt", "super")), ("key", "t", ("ctrl", "shift"))]
