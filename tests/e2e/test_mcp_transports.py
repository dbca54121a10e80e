"""`cu-run mcp` as an MCP client starts it: a fresh VM served over stdio, removed when the client leaves."""

import base64
import io
import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters
from PIL import Image
from vmtools import leftovers

from runner.mcp_server import DEFAULT_TOOLSETS, TOOLSETS


def test_mcp_over_stdio_serves_a_fresh_vm_and_removes_it(linux_image, host, settings, tmp_path):
    # The SDK hands a stdio server only a minimal environment: pass ours (CU_RUN_HOME, ...).
    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "runner", "mcp", "--trajectory", str(tmp_path / "traj"),
                                         "--tools", "screen,mouse,keyboard,accessibility"])

    async def session():
        async with Client(params, read_timeout_seconds=300) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            shot = await client.call_tool("computer_use_screenshot", {})
            info = await client.call_tool("computer_use_display_info", {})
            bad = await client.call_tool("computer_use_keyboard_press", {"key": "nosuchkey"})
            windows = await client.call_tool("computer_use_windows", {})
            return names, shot, info, bad, windows

    names, shot, info, bad, windows = anyio.run(session)
    assert names == sorted(t for s in DEFAULT_TOOLSETS + ("accessibility",) for t in TOOLSETS[s])
    (terminal,) = json.loads(windows.content[0].text)["windows"]
    assert terminal["app"] == "XTerm" and terminal["geometry"]["width"] > 400
    image = Image.open(io.BytesIO(base64.b64decode(shot.content[0].data)))
    assert image.size == (1280, 800)
    assert '"width":1280' in info.content[0].text.replace(" ", "")
    assert bad.is_error and "unknown key" in bad.content[0].text
    assert (tmp_path / "traj" / "trajectory.jsonl").read_text().count("\n") == 4
    assert leftovers(host, settings) == []


def test_mcp_over_http_needs_the_token_and_removes_the_vm_on_sigterm(linux_image, host, settings):
    import select
    import signal
    import subprocess

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    proc = subprocess.Popen([sys.executable, "-m", "runner", "mcp", "--transport", "http"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        assert ready, "cu-run mcp --transport http printed nothing"
        endpoint = json.loads(proc.stdout.readline())
        assert endpoint["url"].startswith("http://127.0.0.1:")
        refused = httpx2.post(endpoint["url"], json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                              headers={"accept": "application/json, text/event-stream"})
        assert refused.status_code == 401

        async def session():
            http = httpx2.AsyncClient(headers={"authorization": f"Bearer {endpoint['token']}"})
            async with Client(streamable_http_client(endpoint["url"], http_client=http)) as client:
                shot = await client.call_tool("computer_use_screenshot", {"scale": 0.5})
                click = await client.call_tool("computer_use_mouse_click", {"x": 640, "y": 400})
                return shot, click

        shot, click = anyio.run(session)
        image = Image.open(io.BytesIO(base64.b64decode(shot.content[0].data)))
        assert image.size == (640, 400)
        assert not click.is_error
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert host.lookup(endpoint["domain"]) is None
    assert leftovers(host, settings) == []
