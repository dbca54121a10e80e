"""A fake model server on loopback for the real agent CLIs (Claude Code, Codex): it speaks the
API each CLI calls (Anthropic's Messages, OpenAI's Responses, streamed as server-sent events)
and answers with a scripted conversation of tool calls. It records every request, so a test can
check what the CLI sent: its tools, its model, its system prompt. Nothing reaches the internet.

A script is a list of steps: a tool call (name, input), a tool call repeated until its result
holds some text (`Until`: how a model waits for the screen), or a final text. The CLI's requests
that carry tools are the agent's turns; each gets the next step, after looking at the result of
the last call. Requests without tools (titles, quota checks the CLIs make on the side) get a short
text and do not advance the script.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from loopback_http import LoopbackHTTP, QuietHandler


@dataclass(frozen=True)
class ToolCall:
    name: str  # the tool as the model calls it: the CLI's own name for it
    input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Until:
    call: ToolCall
    text: str  # what the call's result must hold for the script to go on
    tries: int = 60


Step = ToolCall | Until | Say


NAMESPACE = "/"  # joins a Responses namespace and a tool in it, in the names _step matches


def openai_tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The callable names of a Responses request's tools: functions, and NAMESPACE/TOOL for the
    tools inside a namespace (Codex groups an MCP server's tools so)."""
    names = []
    for tool in tools:
        if tool.get("type") == "namespace":
            names += [f"{tool['name']}{NAMESPACE}{t.get('name')}" for t in tool.get("tools") or [] if isinstance(t, dict)]
        elif tool.get("name"):
            names.append(str(tool["name"]))
    return names


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class FakeModel(LoopbackHTTP):
    """SCRIPT's steps, served to whichever CLI asks. `requests` holds each request's JSON and path."""

    def __init__(self, script: list[Step]) -> None:
        self.script = script
        self.position = 0  # the step the next agent turn gets
        self.tries = 0  # calls made so far of an Until step
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        fake = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                if "/messages" in self.path and "count_tokens" not in self.path:
                    answer = fake.anthropic(body)
                    if isinstance(answer, dict):
                        self._json(answer)
                    else:
                        self.reply(b"".join(answer), "text/event-stream")
                elif self.path.rstrip("/").endswith("/responses"):
                    self.reply(b"".join(fake.openai(body)), "text/event-stream")
                elif "count_tokens" in self.path:
                    self._json({"input_tokens": 100})
                else:
                    self._json({})

            def do_GET(self):  # noqa: N802
                fake.requests.append({"path": self.path, "body": None})
                self._json({"data": []} if self.path.rstrip("/").endswith("/models") else {})

            def do_HEAD(self):  # noqa: N802
                self.reply(b"")

            def _json(self, data: dict[str, Any]) -> None:
                self.reply(json.dumps(data).encode(), "application/json")

        super().__init__(Handler)

    # -- which step a request gets

    def _step(self, offered: list[str], last_result: str) -> ToolCall | Say:
        """The next step for an agent turn that offers the tools OFFERED, LAST_RESULT being the
        text of the last call's result. A tool's name is the one of OFFERED that ends with it
        (each CLI prefixes an MCP server's tools its own way: mcp__cu-run__..., a namespace)."""
        if not offered:
            return Say("ok")
        step = self.script[self.position] if self.position < len(self.script) else Say("Done.")
        if isinstance(step, Until):
            # the result as text, whatever its nesting: no escapes, no spaces
            seen = last_result.replace("\\", "").replace(" ", "")
            if self.tries and (step.text.replace(" ", "") in seen or self.tries >= step.tries):
                self.position, self.tries = self.position + 1, 0
                return self._step(offered, "")
            self.tries += 1
            step = step.call
        else:
            self.position += 1
        if isinstance(step, ToolCall) and step.name not in offered:
            named = [name for name in offered if name.endswith(step.name)]
            step = ToolCall(named[0], step.input) if len(named) == 1 else step
        return step

    @property
    def turns(self) -> list[dict[str, Any]]:
        """The requests that were the agent's turns (they carry tools)."""
        return [r["body"] for r in self.requests if r["body"] and r["body"].get("tools")]

    # -- Anthropic's Messages API

    def anthropic(self, body: dict[str, Any]) -> list[bytes] | dict[str, Any]:
        results = [block for m in body.get("messages", []) if isinstance(m.get("content"), list)
                   for block in m["content"] if block.get("type") == "tool_result"]
        step = self._step([str(t.get("name")) for t in body.get("tools") or []],
                          json.dumps(results[-1].get("content")) if results else "")
        message_id, model = f"msg_{next(self._ids)}", body.get("model", "fake")
        if isinstance(step, ToolCall):
            block = {"type": "tool_use", "id": f"toolu_{next(self._ids)}", "name": step.name, "input": step.input}
            stop = "tool_use"
        else:
            block, stop = {"type": "text", "text": step.text}, "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        if not body.get("stream"):
            return {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [block],
                    "stop_reason": stop, "stop_sequence": None, "usage": usage}
        start = {"type": "tool_use", "id": block.get("id"), "name": step.name, "input": {}} \
            if isinstance(step, ToolCall) else {"type": "text", "text": ""}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step.input)} \
            if isinstance(step, ToolCall) else {"type": "text_delta", "text": step.text}
        return [
            _sse("message_start", {"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
                "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
            _sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 5}}),
            _sse("message_stop", {"type": "message_stop"}),
        ]

    # -- OpenAI's Responses API

    def openai(self, body: dict[str, Any]) -> list[bytes]:
        items = body.get("input", []) if isinstance(body.get("input"), list) else []
        results = [item for item in items if isinstance(item, dict) and item.get("type") == "function_call_output"]
        step = self._step(openai_tool_names(body.get("tools") or []),
                          json.dumps(results[-1].get("output")) if results else "")
        response_id = f"resp_{next(self._ids)}"
        if isinstance(step, ToolCall):
            namespace, _, name = step.name.rpartition(NAMESPACE)
            item = {"type": "function_call", "id": f"fc_{next(self._ids)}", "call_id": f"call_{next(self._ids)}",
                    "name": name, "arguments": json.dumps(step.input), "status": "completed",
                    **({"namespace": namespace} if namespace else {})}
        else:
            item = {"type": "message", "id": f"m_{next(self._ids)}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": step.text, "annotations": []}]}
        response = {"id": response_id, "object": "response", "model": body.get("model", "fake"), "status": "completed",
                    "output": [item], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                                                "input_tokens_details": {"cached_tokens": 0},
                                                "output_tokens_details": {"reasoning_tokens": 0}}}
        return [
            _sse("response.created", {"type": "response.created", "response": {**response, "status": "in_progress",
                                                                                 "output": []}}),
            _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            _sse("response.completed", {"type": "response.completed", "response": response}),
        ]
