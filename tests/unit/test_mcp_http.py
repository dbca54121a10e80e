"""The streamable HTTP transport: the bearer token is required, and with it the SDK client works."""

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from fakes.display import FakeDisplay
from runner.sockets import free_port
from runner.mcp.http import HttpMcpServer
from runner.mcp.server import build_server


def test_requests_without_the_token_are_refused_and_with_it_served():
    with HttpMcpServer(build_server(FakeDisplay(320, 200)), free_port()) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"accept": "application/json, text/event-stream"}
        assert httpx2.post(http.url, json=body, headers=headers).status_code == 401
        wrong = {**headers, "authorization": "Bearer not-the-token"}
        assert httpx2.post(http.url, json=body, headers=wrong).status_code == 401

        async def session():
            client = httpx2.AsyncClient(headers={"authorization": f"Bearer {http.token}"})
            async with Client(streamable_http_client(http.url, http_client=client)) as mcp:
                names = [t.name for t in (await mcp.list_tools()).tools]
                info = await mcp.call_tool("computer_use_display_info", {})
                return names, info

        names, info = anyio.run(session)
        assert "computer_use_screenshot" in names
        assert not info.is_error and '"width":320' in info.content[0].text.replace(" ", "")


def test_each_server_gets_its_own_token():
    a = HttpMcpServer(build_server(FakeDisplay()), free_port())
    b = HttpMcpServer(build_server(FakeDisplay()), free_port())
    assert a.token != b.token and len(a.token) >= 32
