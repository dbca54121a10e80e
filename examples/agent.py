"""An agent program for `cu-run run --agent command --agent-cmd 'python examples/agent.py'`.

cu-run starts it once per episode, in the episode's folder, with the task and the episode's MCP
server in its environment (docs/mcp-and-agents.md):

    CU_RUN_INSTRUCTION  the task's instruction
    CU_RUN_MCP_URL      the MCP server (streamable HTTP), bound to this episode's VM
    CU_RUN_MCP_TOKEN    its bearer token
    CU_RUN_TIMEOUT_S    the time it has; past it cu-run kills it and scores a timeout

It exits 0 when it is done, another code when it broke (scored as agent_error). What it does is
`Policy.next_action`: look at the screen and the instruction, return one tool call, or None when
done. Put a model there. The policy here is a stand-in with no model: it types the text the
instruction quotes ("type "hello" into the terminal") and presses Enter, then stops.

Needs only the MCP SDK (`pip install mcp`, 2.x), which cu-run itself depends on.
"""

from __future__ import annotations

import base64
import os
import re
import sys

import anyio
import httpx2
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.client.streamable_http import streamable_http_client

MAX_STEPS = 20


class Policy:
    """Decides the next tool call from the instruction and the latest screenshot (PNG bytes)."""

    def __init__(self, instruction: str) -> None:
        quoted = re.findall(r'"([^"]+)"', instruction)
        self.plan = ([{"name": "computer_use_keyboard_type", "arguments": {"text": quoted[0]}},
                      {"name": "computer_use_keyboard_press", "arguments": {"key": "enter"}}] if quoted else [])

    def next_action(self, screenshot: bytes) -> dict | None:
        return self.plan.pop(0) if self.plan else None


async def episode(url: str, token: str, instruction: str) -> int:
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60)
    try:
        async with Client(streamable_http_client(url, http_client=http)) as mcp:
            tools = {tool.name for tool in (await mcp.list_tools()).tools}
            print(f"tools: {', '.join(sorted(tools))}", flush=True)
            policy = Policy(instruction)
            for step in range(1, MAX_STEPS + 1):
                shot = await mcp.call_tool("computer_use_screenshot", {})
                png = next(base64.b64decode(c.data) for c in shot.content if c.type == "image")
                action = policy.next_action(png)
                if action is None:
                    print(f"done after {step - 1} actions", flush=True)
                    return 0
                if action["name"] not in tools:
                    print(f"the policy asked for {action['name']}, which this episode does not allow", file=sys.stderr)
                    return 1
                result = await mcp.call_tool(action["name"], action["arguments"])
                print(f"{step}. {action['name']} {action['arguments']}: {'error' if result.is_error else 'ok'}",
                      flush=True)
            print(f"stopped at {MAX_STEPS} actions", flush=True)
            return 0
    finally:
        await http.aclose()


def main() -> int:
    try:
        url, token = os.environ["CU_RUN_MCP_URL"], os.environ["CU_RUN_MCP_TOKEN"]
    except KeyError as missing:
        print(f"{missing} is not set: run me as `cu-run run --agent command --agent-cmd ...`", file=sys.stderr)
        return 2
    try:
        return anyio.run(episode, url, token, os.environ.get("CU_RUN_INSTRUCTION", ""))
    except (httpx2.HTTPError, OSError, MCPError, ExceptionGroup) as exc:  # the SDK raises them grouped
        first = exc.exceptions[0] if isinstance(exc, ExceptionGroup) else exc
        while isinstance(first, ExceptionGroup):
            first = first.exceptions[0]
        print(f"the episode's MCP server refused or could not be reached: {first}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
