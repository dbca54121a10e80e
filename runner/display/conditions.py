"""Conditions a GUI script waits for: a window, the focus, the screen changing or settling.

A fixed sleep in a GUI script is a race that a slower host loses: the editor is not up
yet and the typing lands in the terminal. A condition instead polls what a person would
look at (the window list, the screen) until it holds, or its timeout passes. A timeout
is the script's failure, reported with what was last seen, never a verdict on the task.

    WaitFor(focused="Mousepad", timeout=60)          the focused window's title or app matches
    WaitFor(window=r"^fox\\.txt - Mousepad$")        some window's title matches
    WaitFor(no_window="Save As")                     no window's title matches
    WaitFor(screen_changes=True, region=...)         differs from before the step that came before
    WaitFor(screen_settles=1.0, region=...)          unchanged for 1 s (a blinking cursor never settles)

Patterns are Python regular expressions, searched (not anchored) and case-sensitive.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.display.base import Display
from runner.errors import CuRunError, UsageError
from runner.guest.agent import GuestAgent, GuestAgentError, WindowInfo
from typing_extensions import override

DEFAULT_TIMEOUT_S = 60.0
SCREEN_POLL_S = 0.25  # a capture costs ~30 ms through libvirt
WINDOWS_POLL_S = 0.5  # a window listing is a guest command: ~0.3 s under TCG


class Region(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    x: int = Field(ge=0)
    y: int = Field(ge=0)
    width: int = Field(ge=1)
    height: int = Field(ge=1)


class WaitFor(BaseModel):
    """One condition and how long to wait for it. Exactly one of the condition fields is set."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    window: str | None = Field(default=None, description="a window whose title matches this pattern is open")
    focused: str | None = Field(default=None, description="the focused window's title or app matches this pattern")
    no_window: str | None = Field(default=None, description="no open window's title matches this pattern")
    screen_changes: bool = Field(default=False, description="the screen (or region) differs from how it was "
                                 "before the step that came before this wait")
    screen_settles: float | None = Field(default=None, gt=0, le=60,
                                         description="the screen (or region) stays unchanged this many seconds")
    region: Region | None = Field(default=None, description="for the screen conditions: the part to look at")
    timeout: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=3600, description="seconds before giving up")

    @model_validator(mode="after")
    def _one_condition(self) -> WaitFor:
        set_ = [name for name in ("window", "focused", "no_window", "screen_settles")
                if getattr(self, name) is not None] + (["screen_changes"] if self.screen_changes else [])
        if len(set_) != 1:
            raise ValueError("give exactly one of window, focused, no_window, screen_changes, screen_settles"
                             f" (got {', '.join(set_) or 'none'})")
        if self.region is not None and not self.watches_screen:
            raise ValueError("region goes only with screen_changes or screen_settles")
        for pattern in (self.window, self.focused, self.no_window):
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        return self

    @property
    def watches_screen(self) -> bool:
        return self.screen_changes or self.screen_settles is not None

    def describe(self) -> str:
        where = f" in ({self.region.x}, {self.region.y}, {self.region.width}x{self.region.height})" if self.region else ""
        if self.window is not None:
            return f"a window titled like {self.window!r}"
        if self.focused is not None:
            return f"the focus on a window like {self.focused!r}"
        if self.no_window is not None:
            return f"no window titled like {self.no_window!r}"
        if self.screen_changes:
            return f"the screen to change{where}"
        return f"the screen to stay still for {self.screen_settles:g} s{where}"


class Observer(Protocol):
    """What a condition looks at: the screen, and the window list (through the guest agent)."""

    def screenshot(self) -> bytes: ...

    def windows(self) -> list[WindowInfo]: ...


class ConditionTimeout(CuRunError):
    """A condition did not hold within its timeout. The message says what was last seen."""


@dataclass(frozen=True)
class Waited:
    seconds: float
    polls: int


def wait_for(condition: WaitFor, observer: Observer, *, baseline: bytes | None = None,
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Waited:
    """Polls OBSERVER until CONDITION holds; raises ConditionTimeout when its timeout passes.

    BASELINE is the screen screen_changes compares against (default: the screen at the first poll).
    """
    check = _screen_check(condition, baseline) if condition.watches_screen else _window_check(condition)
    started = clock()
    polls = 0
    while True:
        polls += 1
        held, seen = check(observer, clock())
        if held:
            return Waited(round(clock() - started, 3), polls)
        if clock() - started >= condition.timeout:
            raise ConditionTimeout(f"waited {condition.timeout:g} s for {condition.describe()}; {seen}")
        sleep(SCREEN_POLL_S if condition.watches_screen else WINDOWS_POLL_S)


Check = Callable[[Observer, float], tuple[bool, str]]


def _window_check(condition: WaitFor) -> Check:
    last_error = ""

    def check(observer: Observer, _now: float) -> tuple[bool, str]:
        nonlocal last_error
        try:
            windows = observer.windows()
        except GuestAgentError as exc:
            # Listing races windows that open or close under it: that is "not yet", not a failure.
            last_error = exc.message
            return False, f"the window list failed: {last_error}"
        return _windows_hold(condition, windows), "seen: " + _describe_windows(windows)

    return check


def _windows_hold(condition: WaitFor, windows: list[WindowInfo]) -> bool:
    if condition.window is not None:
        return any(re.search(condition.window, w.title) for w in windows)
    if condition.no_window is not None:
        return not any(re.search(condition.no_window, w.title) for w in windows)
    assert condition.focused is not None
    return any(w.focused and (re.search(condition.focused, w.title) or re.search(condition.focused, w.app))
               for w in windows)


def _describe_windows(windows: list[WindowInfo]) -> str:
    if not windows:
        return "no windows"
    return ", ".join(f"{w.title!r} ({w.app}{', focused' if w.focused else ''})" for w in windows)


def _screen_check(condition: WaitFor, baseline: bytes | None) -> Check:
    reference = _pixels(baseline, condition.region) if baseline is not None else None
    last: bytes | None = None  # screen_settles: the latest picture, and since when it has not changed
    still_since = 0.0

    def check(observer: Observer, now: float) -> tuple[bool, str]:
        nonlocal reference, last, still_since
        pixels = _pixels(observer.screenshot(), condition.region)
        if condition.screen_changes:
            if reference is None:
                reference = pixels
            return pixels != reference, "the screen stayed as it was"
        assert condition.screen_settles is not None
        if pixels != last:
            last, still_since = pixels, now
            return False, "the screen kept changing"
        return now - still_since >= condition.screen_settles, "the screen kept changing"

    return check


def _pixels(png: bytes, region: Region | None) -> bytes:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    if region is not None:
        if region.x + region.width > image.width or region.y + region.height > image.height:
            raise ValueError(f"the region ({region.x}, {region.y}, {region.width}x{region.height}) is not inside "
                             f"the {image.width}x{image.height} screen")
        image = image.crop((region.x, region.y, region.x + region.width, region.y + region.height))
    return image.tobytes()


class DisplayObserver(Observer):
    """An Observer over a Display and, for the window conditions, the image's guest agent."""

    def __init__(self, display: Display, guest_agent: GuestAgent | None) -> None:
        self.display = display
        self.guest_agent = guest_agent

    @override
    def screenshot(self) -> bytes:
        return self.display.screenshot()

    @override
    def windows(self) -> list[WindowInfo]:
        if self.guest_agent is None:
            raise UsageError("the window conditions need the image's guest agent, and this image has none",
                             fix="rebuild the image (cu-run image build NAME --force), or wait on the screen instead")
        return self.guest_agent.windows()
