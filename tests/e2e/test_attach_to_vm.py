"""`cu-run mcp --attach`: cu-run's MCP server over a screen it did not start (a VM from
`cu-run vm up`), driven by an independent MCP client through every tool; the click and the
typed text are read back from inside the guest."""

import json
import os
import signal
import sys

import anyio
from mcp import Client, StdioServerParameters
from test_cli_vm import finish, read_endpoints, vm_up
from test_mcp_transports import ALL_SETS, check_conformance, exercise_every_tool


def test_mcp_attach_serves_a_vm_it_did_not_start(linux_image, tmp_path):
    proc = vm_up()
    try:
        endpoints = read_endpoints(proc)
        (tmp_path / "vnc-password").write_text(endpoints["vnc_password"] + "\n")
        ssh = endpoints["ssh"]
        manifest = linux_image.manifest
        params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
            "-m", "runner", "mcp", "--attach", f"vnc://{endpoints['vnc']}",
            "--password-file", str(tmp_path / "vnc-password"),
            "--ssh", f"{ssh['user']}@{ssh['host']}:{ssh['port']}", "--key", ssh["key"],
            "--host-key", manifest.ssh.host_key, "--guest-agent", manifest.guest_agent,
            "--pointer-offset", str(manifest.pointer_offset),
            "--tools", ",".join(ALL_SETS), "--file-root", "/home/cu", "--trajectory", str(tmp_path / "traj")])

        async def session():
            async with Client(params, read_timeout_seconds=300) as client:
                return await exercise_every_tool(client)

        check_conformance(anyio.run(session))
        steps = [json.loads(line) for line in (tmp_path / "traj" / "trajectory.jsonl").read_text().splitlines()]
        assert steps[0]["tool"] == "computer_use_screenshot" and (tmp_path / "traj" / steps[0]["screenshot"]).exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        finish(proc)
