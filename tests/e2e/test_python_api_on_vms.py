"""cu_run's Python API on real VMs: one test per entry point that starts VMs (run, validate,
open_vm with its shells, display and MCP endpoint), reading back with read_results and compare."""

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from vmtools import leftovers

import cu_run


@pytest.mark.full  # three episodes; the CLI's run and validate, which call the same functions, are in the default tier
def test_run_then_validate_then_read_and_compare(linux_image, settings, host, tmp_path):
    quiet = Console(quiet=True)
    result = cu_run.run("linux-core", "oracle", tasks=["folder-tree"], out=tmp_path / "run",
                        cache_dir=settings.cache_dir, console=quiet)
    assert result.exit_code == 0 and result.out_dir == tmp_path / "run"
    assert cu_run.read_results(result.out_dir).rate("folder-tree") == 1.0

    validation = cu_run.validate("linux-core", tasks=["folder-tree"], out=tmp_path / "validate",
                                 cache_dir=settings.cache_dir, console=quiet)
    assert validation.sound, validation.problems
    nop = cu_run.read_results(validation.out_dir / "nop")
    assert [r.outcome for r in nop.records] == ["fail"]

    comparison = cu_run.compare(result.out_dir, validation.out_dir / "nop")
    (row,) = comparison.tasks
    assert row["task"] == "folder-tree" and row["delta"] == -1.0
    assert leftovers(host, settings) == []


def test_open_vm_gives_its_shells_screen_and_mcp_endpoint_then_removes_it(linux_image, settings, host, tmp_path):
    with cu_run.open_vm("linux-test", cache_dir=settings.cache_dir) as vm:
        assert vm.user_shell.run("id -un").stdout.strip() == "cu"
        assert vm.admin_shell.run("id -un").stdout.strip() == "root"
        assert vm.display.screenshot().startswith(b"\x89PNG")
        assert vm.endpoints.vnc_password
        with vm.serve_mcp(trajectory=tmp_path) as mcp:

            async def session():
                http = httpx2.AsyncClient(headers={"authorization": f"Bearer {mcp.token}"}, timeout=120)
                async with Client(streamable_http_client(mcp.url, http_client=http)) as client:
                    tools = {t.name for t in (await client.list_tools()).tools}
                    shot = await client.call_tool("computer_use_screenshot", {})
                    return tools, shot

            tools, shot = anyio.run(session)
        assert "computer_use_mouse_click" in tools and not shot.is_error
        assert mcp.trajectory is not None and "screenshot" in mcp.trajectory.read_text()
        name = vm.name
    assert host.lookup(name) is None
    assert leftovers(host, settings) == []
