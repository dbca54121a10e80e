"""The host's side of the guest agent: the desktop's windows and accessibility tree.

The guest agent (guest_agent/ in the source tree, installed into the image) is a
command the runner runs through the episode's GuestShell; the image manifest says how
to invoke it (``guest_agent``). Going through the shell means nothing new listens in
the guest and nothing but the runner can ask. Its JSON is checked here, so a broken
agent is one clear error, never a half-parsed answer handed to the model.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import CuRunError
from runner.guest.base import GuestShell

CALL_TIMEOUT_S = 60.0  # an AT-SPI walk of a busy desktop takes seconds under TCG


class GuestAgentError(CuRunError):
    """The guest agent ran but failed, or answered something that is not its JSON."""


class Geometry(BaseModel):
    model_config = ConfigDict(frozen=True)
    x: int
    y: int
    width: int
    height: int


class WindowInfo(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    title: str
    app: str
    pid: int | None = None
    focused: bool
    minimized: bool = False
    geometry: Geometry


class AccessibleNode(BaseModel):
    role: str
    name: str = ""
    bounds: list[int] | None = Field(default=None, description="[x, y, width, height] in screen pixels")
    states: list[str] = Field(default_factory=list)
    text: str | None = None
    children: list[AccessibleNode] = Field(default_factory=list)
    children_omitted: int | None = Field(default=None, description="children below max_depth, not listed")
    truncated: bool | None = Field(default=None, description="on the root: max_nodes was reached")


class GuestAgent:
    def __init__(self, shell: GuestShell, command: str,
                 quote: Callable[[Sequence[str]], str] = shlex.join, *, channel: str = "the guest shell") -> None:
        """QUOTE: the guest shell's own quoting of an argument list (TaskScripts.quote_arguments):
        POSIX quotes mean something else to PowerShell. CHANNEL: whose shell SHELL is, as errors
        name it ("the desktop user cu's shell"): what the guest allows differs by account."""
        self.shell = shell
        self.command = command
        self.quote = quote
        self.channel = channel

    def ping(self) -> int:
        """The agent's protocol version; raises GuestAgentError, naming the channel and what
        failed, when it does not answer."""
        data = self._call("ping")
        if not isinstance(data, dict) or data.get("agent") != "cu-guest-agent":
            raise GuestAgentError(f"the guest agent's ping on {self.channel} answered {data!r}")
        return int(data.get("version", 0))

    def windows(self) -> list[WindowInfo]:
        data = self._call("windows")
        try:
            if not isinstance(data, dict):
                raise TypeError(f"the answer is {type(data).__name__}, not an object")
            return [WindowInfo.model_validate(w) for w in data["windows"]]
        except (KeyError, TypeError, ValidationError) as exc:
            raise GuestAgentError(f"the guest agent's window list is malformed: {exc}") from exc

    def accessibility_tree(self, app: str | None = None, max_depth: int = 20,
                           max_nodes: int = 500) -> AccessibleNode:
        args = ["tree", "--max-depth", str(max_depth), "--max-nodes", str(max_nodes)]
        if app:
            args += ["--app", app]
        data = self._call(*args)
        try:
            return AccessibleNode.model_validate(data)
        except ValidationError as exc:
            raise GuestAgentError(f"the guest agent's accessibility tree is malformed: {exc}") from exc

    def _call(self, *args: str) -> object:
        # The Windows agent passes its arguments one a line; an app name is the model's text.
        if any("\n" in a or "\r" in a for a in args):
            raise GuestAgentError("a guest agent argument may not hold a line break")
        result = self.shell.run(f"{self.command} {self.quote(args)}", timeout=CALL_TIMEOUT_S)
        if result.exit_code != 0:
            detail = (result.stderr.strip() or result.stdout.strip() or "no output")[-500:]
            raise GuestAgentError(
                f"the guest agent failed ({args[0]} on {self.channel}, exit {result.exit_code}): {detail}",
                fix="the image may predate the guest agent, or the grant that lets this account start it "
                    "(a Windows image's cu-guest-agent task): cu-run image build --force")
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            raise GuestAgentError(
                f"the guest agent's {args[0]} answer on {self.channel} is not JSON: {result.stdout[:200]!r}") from None
