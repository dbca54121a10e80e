"""`cu-run mcp` as an MCP client starts it, over stdio and over streamable HTTP: the same
conformance run over each transport, every tool called, what matters seen from inside the
guest; then the VM is gone."""

import base64
import io
import json
import os
import select
import signal
import subprocess
import sys

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from PIL import Image
from vmtools import leftovers

from runner.mcp.server import TOOLSETS

ALL_SETS = ("screen", "mouse", "keyboard", "files", "accessibility")
SERVE = ["-m", "runner", "mcp", "--tools", ",".join(ALL_SETS), "--file-root", "/home/cu"]
TYPED = 'A_b>c|d~e "q" $HOME {x} 100%'


def text_of(result) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(client, name, args=None):
    result = await client.call_tool(name, args or {})
    assert not result.is_error, f"{name} {args}: {text_of(result)}"
    return result


async def until(client, name, args, holds, timeout: float = 120.0, errors_are_not_yet: bool = False) -> str:
    """Calls tool NAME until HOLDS(its text): the guest gets to things in its own time."""
    deadline = anyio.current_time() + timeout
    while True:
        result = await client.call_tool(name, args)
        if not result.is_error or not errors_are_not_yet:
            assert not result.is_error, f"{name} {args}: {text_of(result)}"
            if holds(text_of(result)):
                return text_of(result)
        assert anyio.current_time() < deadline, f"{name} {args} did not give what was awaited in {timeout:.0f} s"
        await anyio.sleep(0.5)


async def exercise_every_tool(client) -> dict:
    """Calls every tool of every set once and returns what the checks need."""
    names = sorted(t.name for t in (await client.list_tools()).tools)
    shot = await call(client, "computer_use_screenshot")
    region = await call(client, "computer_use_screenshot_region", {"x": 10, "y": 20, "width": 300, "height": 200,
                                                                    "format": "jpeg"})
    info = await call(client, "computer_use_display_info")
    # Into the terminal, through the GUI alone: the guest writes where its pointer is and what
    # arrived from the keyboard; file_download brings both back.
    await call(client, "computer_use_mouse_click", {"x": 200, "y": 150})
    await until(client, "computer_use_windows", {},
                lambda text: any(w["app"] == "XTerm" and w["focused"] for w in json.loads(text)["windows"]))
    command = (f"xdotool getmouselocation --shell > ~/mcp-pos.txt; printf '%s\\n' '{TYPED}' > ~/mcp-typed.txt\n")
    await call(client, "computer_use_keyboard_type", {"text": command})
    # The second file is written after the first: once it is whole, both are.
    typed = await until(client, "file_download", {"path": "mcp-typed.txt"}, lambda text: text.endswith("\n"),
                        errors_are_not_yet=True)
    position = text_of(await call(client, "file_download", {"path": "mcp-pos.txt"}))
    pointer = json.loads(text_of(await call(client, "computer_use_mouse_position")))
    await call(client, "computer_use_keyboard_press", {"key": "escape"})
    await call(client, "computer_use_keyboard_hotkey", {"keys": "ctrl+l"})
    await call(client, "computer_use_mouse_move", {"x": 300, "y": 200})
    await call(client, "computer_use_mouse_drag", {"start_x": 100, "start_y": 100, "end_x": 300, "end_y": 120})
    await call(client, "computer_use_mouse_scroll", {"x": 200, "y": 150, "direction": "down", "amount": 2})
    windows = json.loads(text_of(await call(client, "computer_use_windows")))
    tree = json.loads(text_of(await call(client, "computer_use_accessibility_tree", {"max_depth": 3})))
    off_screen = await client.call_tool("computer_use_mouse_click", {"x": 1280, "y": 10})
    outside = await client.call_tool("file_download", {"path": "../../etc/passwd"})
    return dict(names=names, shot=shot, region=region, info=json.loads(text_of(info)), position=position,
                typed=typed, pointer=pointer, windows=windows, tree=tree, off_screen=off_screen, outside=outside)


def check_conformance(seen: dict) -> None:
    assert seen["names"] == sorted(t for s in ALL_SETS for t in TOOLSETS[s])
    image = Image.open(io.BytesIO(base64.b64decode(seen["shot"].content[0].data)))
    assert image.format == "PNG" and image.size == (1280, 800)
    region = Image.open(io.BytesIO(base64.b64decode(seen["region"].content[0].data)))
    assert region.format == "JPEG" and region.size == (300, 200)
    assert seen["info"] == {"width": 1280, "height": 800}
    assert "X=200\n" in seen["position"] and "Y=150\n" in seen["position"], seen["position"]  # the click landed there
    assert seen["typed"] == TYPED + "\n"  # every symbol arrived as typed
    assert seen["pointer"] == {"x": 200, "y": 150}
    assert [w["app"] for w in seen["windows"]["windows"]] == ["XTerm"]
    assert seen["tree"]["role"] == "desktop"
    assert seen["off_screen"].is_error and "outside" in text_of(seen["off_screen"])
    assert seen["outside"].is_error and "outside /home/cu" in text_of(seen["outside"])


def test_mcp_over_stdio_serves_a_fresh_vm_and_removes_it(linux_image, host, settings, tmp_path):
    # The SDK hands a stdio server only a minimal environment: pass ours (CU_RUN_HOME, ...).
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=SERVE + ["--trajectory", str(tmp_path / "traj")])

    async def session():
        async with Client(params, read_timeout_seconds=300) as client:
            return await exercise_every_tool(client)

    seen = anyio.run(session)
    check_conformance(seen)
    steps = [json.loads(l) for l in (tmp_path / "traj" / "trajectory.jsonl").read_text().splitlines()]
    assert steps[0]["tool"] == "computer_use_screenshot" and steps[0]["screenshot"] == "step-0001.png"
    assert {"step", "time", "tool", "arguments", "result", "duration_s"} <= set(steps[0])
    assert leftovers(host, settings) == []


def test_mcp_over_http_needs_the_token_and_removes_the_vm_on_sigterm(linux_image, host, settings):
    proc = subprocess.Popen([sys.executable, *SERVE, "--transport", "http"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        assert ready, "cu-run mcp --transport http printed nothing"
        endpoint = json.loads(proc.stdout.readline())
        assert endpoint["url"].startswith("http://127.0.0.1:")
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"accept": "application/json, text/event-stream"}
        assert httpx2.post(endpoint["url"], json=request, headers=accept).status_code == 401
        wrong = {**accept, "authorization": "Bearer not-the-token"}
        assert httpx2.post(endpoint["url"], json=request, headers=wrong).status_code == 401

        async def session():
            http = httpx2.AsyncClient(headers={"authorization": f"Bearer {endpoint['token']}"}, timeout=120)
            async with Client(streamable_http_client(endpoint["url"], http_client=http)) as client:
                return await exercise_every_tool(client)

        check_conformance(anyio.run(session))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert host.lookup(endpoint["domain"]) is None
    assert leftovers(host, settings) == []
