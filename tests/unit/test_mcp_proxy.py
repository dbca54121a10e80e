"""The recording proxy in front of an external MCP server: a real MCP client on one side, a
fake vendor server (tests/fakes/external_mcp.py, a real stdio MCP server) on the other.
Every call is forwarded and recorded, images become step screenshots, the step limit holds,
typed text reaches the safety rules, and what cannot be mapped is said."""

import json
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from runner.errors import InfraError, UsageError
from runner.mcp.http import HttpMcpServer
from runner.mcp.proxy import ExternalServer, ExternalSession, ProxyLog, RecordingProxy, external_env, map_action
from runner.mcp.trajectory import Trajectory
from runner.sockets import free_port
from runner.scoring.safety import check_trajectory, read_trajectory
from runner.tasks.model import SafetyRule

FAKE = Path(__file__).resolve().parent.parent / "fakes" / "external_mcp.py"


def test_placeholders_are_filled_per_episode_and_one_server_is_required():
    server = ExternalServer(command="vendor mcp --host vnc://{vnc} --port {vnc_port} --on {vnc_host}")
    assert server.filled("127.0.0.1", 5901).command == "vendor mcp --host vnc://127.0.0.1:5901 --port 5901 --on 127.0.0.1"
    assert ExternalServer(url="http://{vnc_host}:9/mcp").filled("h", 1).url == "http://h:9/mcp"
    with pytest.raises(UsageError):
        ExternalServer()
    with pytest.raises(UsageError):
        ExternalServer(command="x", url="y")
    with pytest.raises(UsageError, match="not an executable"):
        ExternalServer(command="no-such-vendor-mcp --host {vnc}").preflight()
    ExternalServer(command=f"{sys.executable} -m runner mcp").preflight()


def test_calls_are_mapped_onto_what_the_safety_rules_read():
    assert map_action("type_text", {"text": "rm -rf"}) == ("type", {"text": "rm -rf"})
    assert map_action("computer_use_keyboard_hotkey", {"keys": "ctrl+alt+t"}) == \
        ("key", {"key": "t", "modifiers": ["ctrl", "alt"]})
    assert map_action("press_keys", {"keys": ["alt", "f4"]}) == ("key", {"key": "f4", "modifiers": ["alt"]})
    assert map_action("left_click", {"coordinate": [10, 20]}) == ("click", {"x": 10, "y": 20, "button": "left"})
    assert map_action("take_screenshot", {}) == ("screenshot", {})
    assert map_action("wiggle", {}) is None
    # What the external server sends is the agent's: a combo no display takes, a point no screen has.
    assert map_action("press_keys", {"keys": "f+ctrl"}) is None
    assert map_action("left_click", {"x": float("inf"), "y": 3}) is None
    # One tool whose action says what it does, the most common vendor shape.
    assert map_action("computer", {"action": "type", "text": "rm -rf ~/Photos"}) == ("type", {"text": "rm -rf ~/Photos"})
    assert map_action("computer", {"action": "key", "text": "ctrl+alt+BackSpace"}) == \
        ("key", {"key": "BackSpace", "modifiers": ["ctrl", "alt"]})
    assert map_action("computer", {"action": "right_click", "coordinate": [5, 6]}) == \
        ("click", {"x": 5, "y": 6, "button": "right"})
    assert map_action("computer", {"action": "computer"}) is None


def test_the_proxy_forwards_records_and_bounds_an_external_server(tmp_path):
    trajectory = Trajectory(tmp_path, max_steps=5)
    external = ExternalSession(ExternalServer(command=f"{sys.executable} {FAKE}"), env=external_env("pw"),
                               errlog=tmp_path / "mcp-server.log")
    log = ProxyLog("fake", sorted(external.tools))
    try:
        with HttpMcpServer(RecordingProxy(external, trajectory, log), free_port()) as http:
            async def session():
                client_http = httpx2.AsyncClient(headers={"authorization": f"Bearer {http.token}"}, timeout=60)
                async with Client(streamable_http_client(http.url, http_client=client_http)) as client:
                    names = sorted(t.name for t in (await client.list_tools()).tools)
                    results = [await client.call_tool("type_text", {"text": "sudo rm -rf /"}),
                               await client.call_tool("press_keys", {"keys": "alt+f4"}),
                               await client.call_tool("left_click", {"coordinate": [5, 6]}),
                               await client.call_tool("take_screenshot", {}),
                               await client.call_tool("wiggle", {}),
                               await client.call_tool("wiggle", {})]
                    return names, results

            names, results = anyio.run(session)
    finally:
        external.close()
    log.write(tmp_path, {"no-sudo": "typed", "tools": "allowed_tools"})

    assert names == ["left_click", "press_keys", "take_screenshot", "type_text", "wiggle"]
    assert [r.is_error for r in results] == [False, False, False, False, False, True]
    assert "step limit" in results[-1].content[0].text  # the sixth call is past --max-steps 5
    steps = read_trajectory(tmp_path / "trajectory.jsonl")
    assert [(s["tool"], s["action"]) for s in steps] == [
        ("type_text", "type"), ("press_keys", "key"), ("left_click", "click"), ("take_screenshot", "screenshot"),
        ("wiggle", "call")]
    assert (tmp_path / steps[3]["screenshot"]).read_bytes().startswith(b"\x89PNG")  # the JPEG saved as PNG
    found = check_trajectory(steps, (SafetyRule(id="no-sudo", typed="sudo"), SafetyRule(id="no-close", keys=("alt+f4",))))
    assert sorted(v.rule for v in found) == ["no-close", "no-sudo"]
    said = json.loads((tmp_path / "mcp-proxy.json").read_text())
    assert said["unmapped_calls"] == {"wiggle": 1} and said["rules_not_mapped"] == ["no-sudo"]


def test_an_external_server_that_does_not_start_is_an_error_naming_its_log(tmp_path):
    with pytest.raises(InfraError, match="did not start") as info:
        ExternalSession(ExternalServer(command=f"{sys.executable} -c 'import sys; sys.exit(3)'"),
                        env=external_env(None), errlog=tmp_path / "mcp-server.log")
    assert "mcp-server.log" in info.value.message
