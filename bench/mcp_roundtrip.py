"""MCP benchmark: screenshot and action round trips through the MCP server vs the raw Display.

    python bench/mcp_roundtrip.py [--n 50]

One VM, the SDK's in-process client (no transport cost): what the server layer adds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize, timed

from runner.config import Settings
from runner.mcp.server import build_server
from runner.runs.session import open_vm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    with open_vm(Settings.resolve(), "linux-test") as vm:
        display = vm.display
        server = build_server(display)
        raw = {"screenshot": [], "click": [], "key": []}
        over_mcp = {"screenshot": [], "click": [], "key": []}

        async def mcp_call(client, name: str, args: dict) -> float:
            started = time.perf_counter()
            await client.call_tool(name, args)
            return time.perf_counter() - started

        async def session() -> None:
            async with Client(server) as client:
                # Each action in its own interleaved loop: keys right after a click wait for the
                # display's click settle time, which would be measured instead of the key.
                for _ in range(args.n):
                    raw["screenshot"] += timed(display.screenshot, 1)
                    over_mcp["screenshot"].append(await mcp_call(client, "computer_use_screenshot", {}))
                for _ in range(args.n):
                    raw["key"] += timed(lambda: display.key("shift"), 1)
                    over_mcp["key"].append(await mcp_call(client, "computer_use_keyboard_press", {"key": "shift"}))
                for _ in range(args.n):
                    raw["click"] += timed(lambda: display.click(1000, 500), 1)
                    over_mcp["click"].append(await mcp_call(client, "computer_use_mouse_click", {"x": 1000, "y": 500}))

        anyio.run(session)
    results = {}
    for action in raw:
        r, m = summarize(raw[action]), summarize(over_mcp[action])
        results[action] = {"display": r, "mcp": m, "mcp_over_display_median": round(m["median_s"] / r["median_s"], 2)}
    emit("mcp", results)


if __name__ == "__main__":
    main()
