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
from common import emit, summarize, timed  # noqa: E402

from runner.config import Settings  # noqa: E402
from runner.mcp_server import build_server  # noqa: E402
from runner.session import open_vm  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    with open_vm(Settings.resolve(), "linux-test") as vm:
        display = vm.display
        server = build_server(display)
        raw = {"screenshot": [], "click": [], "key": []}
        over_mcp = {"screenshot": [], "click": [], "key": []}

        async def session() -> None:
            async with Client(server) as client:
                for _ in range(args.n):
                    # interleaved, so drift on this noisy host hits both alike
                    raw["screenshot"] += timed(display.screenshot, 1)
                    started = time.perf_counter()
                    await client.call_tool("computer_use_screenshot", {})
                    over_mcp["screenshot"].append(time.perf_counter() - started)
                    raw["click"] += timed(lambda: display.click(1000, 500), 1)
                    started = time.perf_counter()
                    await client.call_tool("computer_use_mouse_click", {"x": 1000, "y": 500})
                    over_mcp["click"].append(time.perf_counter() - started)
                    raw["key"] += timed(lambda: display.key("shift"), 1)
                    started = time.perf_counter()
                    await client.call_tool("computer_use_keyboard_press", {"key": "shift"})
                    over_mcp["key"].append(time.perf_counter() - started)

        anyio.run(session)
    results = {}
    for action in raw:
        r, m = summarize(raw[action]), summarize(over_mcp[action])
        results[action] = {"display": r, "mcp": m, "mcp_over_display_median": round(m["median_s"] / r["median_s"], 2)}
    emit("mcp", results)


if __name__ == "__main__":
    main()
