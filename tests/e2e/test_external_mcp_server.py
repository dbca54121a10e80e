"""An external MCP server as the agent's tools, for real: the scripted agent solves linux-core
tasks through `cu-run mcp --attach vnc://{vnc}` started per episode behind the recording proxy
(the same shape as a vendor's server), and every call is in the trajectory with its screenshots."""

import json
import sys

import pytest
from vmtools import cu_run

TASKS = ("editor-write-save", "folder-tree")


@pytest.mark.full  # the same external server is the attached arm of test_study_on_vms.py
def test_the_scripted_agent_passes_through_an_external_mcp_server(linux_image, tmp_path):
    out = tmp_path / "run"
    external = f"{sys.executable} -m runner mcp --attach vnc://{{vnc}}"
    result = cu_run("run", "--suite", "linux-core", "--agent", "scripted", "--tasks", ",".join(TASKS),
                    "--vm-pool", "2", "--mcp-server", external, "--out", str(out))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == sorted(TASKS) and {r["outcome"] for r in records} == {"pass"}
    for task in TASKS:
        episode = out / task / "1"
        steps = [json.loads(line) for line in (episode / "trajectory.jsonl").read_text().splitlines()]
        assert {s["tool"] for s in steps} >= {"computer_use_mouse_click", "computer_use_keyboard_type",
                                              "computer_use_screenshot"}
        shots = [s["screenshot"] for s in steps if s.get("screenshot")]
        assert shots and all((episode / name).stat().st_size > 0 for name in shots)
        assert any(s["action"] == "type" and s["arguments"]["text"] for s in steps)  # mapped for the safety rules
        proxy = json.loads((episode / "mcp-proxy.json").read_text())
        assert "mcp --attach vnc://127.0.0.1:" in proxy["server"] and "computer_use_screenshot" in proxy["tools"]
