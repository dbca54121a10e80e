"""The scripted agent: a real MCP client following a task's GUI script (runner.agents.ui_script)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.types import TextContent
from mcp.client.streamable_http import streamable_http_client

from runner.agents.base import Agent, AgentResult
from runner.agents.registry import UI_ORACLE, BuiltIn, register_agent
from runner.display.conditions import ConditionTimeout, DisplayObserver, wait_for
from runner.agents.ui_script import SleepStep, Step, ToolStep, WaitStep, baseline_needed, load_ui_script
from runner.vm.episode import EpisodeVM
from runner.errors import CuRunError, UsageError
from runner.guest.agent import GuestAgent
from runner.mcp.session import McpSession
from runner.tasks.model import Task
from typing_extensions import override



class ScriptedAgent(Agent):
    """A real MCP client that solves a task through the GUI tools only, following the task's
    ui_oracle.yaml (runner.agents.ui_script): tool calls, conditions to wait for, and rare fixed pauses.
    It proves the GUI path works end to end and catches regressions in it.

    Conditions look at the screen and the window list directly, not through MCP: like a
    person watching, they are not steps of the trajectory and count against no step limit.
    """

    name = "scripted"
    needs_mcp = True

    def __init__(self, script: str = UI_ORACLE) -> None:
        # Another script than the solution (--agent-script) plays a misbehaving agent: one that
        # also breaks something, or obeys a planted instruction, to prove the checks catch it.
        self.script = script

    @override
    def preflight(self, tasks: tuple[Task, ...]) -> None:
        missing = [t.id for t in tasks if not (t.folder / self.script).is_file()]
        if missing:
            raise UsageError(f"the scripted agent needs {self.script} in every task; missing in: {', '.join(missing)}",
                             fix="pick tasks that have one with --tasks")
        for t in tasks:
            load_ui_script(t.folder / self.script)

    @override
    def run(self, vm: EpisodeVM, task: Task, log: Path, session: McpSession | None) -> AgentResult:
        assert session is not None
        steps = load_ui_script(task.folder / self.script)
        command = vm.image.manifest.guest_agent
        observer = DisplayObserver(vm.display, GuestAgent(vm.shell, command, vm.image.manifest.guest.scripts.quote_arguments)
                                       if command else None)
        lines: list[str] = []
        try:
            result = anyio.run(self._drive, session, observer, steps, lines, task.spec.timeout_s)
            if result.ended != "done":
                try:  # what the screen showed when the script gave up
                    (log.parent / "gave-up.png").write_bytes(observer.screenshot())
                except CuRunError as exc:
                    lines.append(f"no screenshot of where it gave up: {exc}")
        finally:
            log.write_text("\n".join(lines) + "\n")
        return result

    async def _drive(self, session: McpSession, observer: DisplayObserver, steps: list[Step], lines: list[str],
                     timeout: float) -> AgentResult:
        http = httpx2.AsyncClient(headers={"authorization": f"Bearer {session.token}"}, timeout=60)
        deadline = time.monotonic() + timeout
        baseline: bytes | None = None
        try:
            with anyio.fail_after(timeout):
                async with Client(streamable_http_client(session.url, http_client=http)) as client:
                    for number, step in enumerate(steps, 1):
                        if isinstance(step, SleepStep):
                            await anyio.sleep(step.wait)
                            lines.append(f"{number}: paused {step.wait:g} s")
                        elif isinstance(step, WaitStep):
                            ended = await self._wait(number, step, observer, baseline, deadline, lines)
                            if ended is not None:
                                return ended
                        else:
                            if baseline_needed(steps, number - 1):
                                baseline = await anyio.to_thread.run_sync(observer.screenshot)
                            ended = await self._call(number, step, client, lines)
                            if ended is not None:
                                return ended
        except TimeoutError:
            return AgentResult("timeout", f"the script ran past {timeout} s")
        finally:
            await http.aclose()
        return AgentResult("done")

    @staticmethod
    async def _call(number: int, step: ToolStep, client: Client, lines: list[str]) -> AgentResult | None:
        result = await client.call_tool(step.tool, step.args)
        text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
        lines.append(f"{number}: {step.tool} {step.args} -> "
                     f"{'ERROR ' if result.is_error else ''}{text or result.content[0].type}")
        if result.is_error:
            return AgentResult("error", f"step {number} ({step.tool}) failed: {text}")
        return None

    @staticmethod
    async def _wait(number: int, step: WaitStep, observer: DisplayObserver, baseline: bytes | None,
                    deadline: float, lines: list[str]) -> AgentResult | None:
        """Waits for the step's condition, within what is left of the episode's time: the wait
        runs in a thread, which the episode's own limit cannot cancel."""
        left = deadline - time.monotonic()
        condition = step.wait_for
        capped = condition.timeout > left
        if capped:
            condition = condition.model_copy(update={"timeout": max(0.1, left)})
        try:
            waited = await anyio.to_thread.run_sync(
                lambda: wait_for(condition, observer, baseline=baseline))
        except ConditionTimeout as exc:
            lines.append(f"{number}: gave up: {exc.message}")
            if capped:
                return AgentResult("timeout", f"the script ran past its time while step {number} waited for "
                                              f"{condition.describe()}")
            return AgentResult("error", f"step {number}: {exc.message}")
        except (UsageError, ValueError) as exc:
            lines.append(f"{number}: cannot wait: {exc}")
            return AgentResult("error", f"step {number}: {exc}")
        lines.append(f"{number}: {condition.describe()} after {waited.seconds:g} s ({waited.polls} looks)")
        return None


register_agent(BuiltIn("scripted", lambda options: ScriptedAgent(options.script)))
