"""Conditions a GUI script waits for, against a scripted observer and a fake clock."""

import io

import pytest
from PIL import Image
from pydantic import ValidationError

from runner.display.conditions import ConditionTimeout, Observer, Region, WaitFor, wait_for
from runner.guest.agent import GuestAgentError, WindowInfo
from typing_extensions import override


def png(color: tuple[int, int, int], size=(40, 30), dot: tuple[int, int] | None = None) -> bytes:
    image = Image.new("RGB", size, color)
    if dot is not None:
        image.putpixel(dot, (255, 255, 255))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def window(title: str, app: str = "App", focused: bool = False) -> WindowInfo:
    return WindowInfo(id="0x1", title=title, app=app, focused=focused,
                      geometry={"x": 0, "y": 0, "width": 10, "height": 10})


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class ScriptedObserver(Observer):
    """A fake Observer: each poll returns the next of the given screens or window lists (the last repeats)."""

    def __init__(self, screens=(), windows=()) -> None:
        self.screens, self.window_lists = list(screens), list(windows)
        self.polls = 0

    def _next(self, items):
        self.polls += 1
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, Exception):
            raise item
        return item

    @override
    def screenshot(self) -> bytes:
        return self._next(self.screens)

    @override
    def windows(self) -> list[WindowInfo]:
        return self._next(self.window_lists)


def run(condition: WaitFor, observer, **kwargs):
    clock = FakeClock()
    return wait_for(condition, observer, clock=clock, sleep=clock.sleep, **kwargs), clock


def test_focused_waits_until_the_focus_moves_and_matches_title_or_app():
    terminal = [window("cu@cu-guest: ~", "XTerm", focused=True)]
    editor = [window("cu@cu-guest: ~", "XTerm"), window("fox.txt - Mousepad", "Mousepad", focused=True)]
    observer = ScriptedObserver(windows=[terminal, terminal, terminal, editor])
    waited, clock = run(WaitFor(focused="Mousepad"), observer)
    assert waited.polls == 4 and clock.now == pytest.approx(1.5)
    assert run(WaitFor(focused="^XTerm$"), ScriptedObserver(windows=[terminal]))[0].polls == 1


def test_window_and_no_window_read_titles_as_patterns():
    modified = [window("*fox.txt - Mousepad", "Mousepad", focused=True)]
    saved = [window("fox.txt - Mousepad", "Mousepad", focused=True)]
    assert run(WaitFor(window=r"^fox\.txt - Mousepad$"), ScriptedObserver(windows=[modified, saved]))[0].polls == 2
    assert run(WaitFor(no_window=r"^\*"), ScriptedObserver(windows=[modified, modified, saved]))[0].polls == 3


def test_a_condition_that_never_holds_times_out_saying_what_was_seen():
    terminal = [window("cu@cu-guest: ~", "XTerm", focused=True)]
    with pytest.raises(ConditionTimeout) as caught:
        run(WaitFor(focused="Mousepad", timeout=5), ScriptedObserver(windows=[terminal]))
    message = caught.value.message
    assert "waited 5 s for the focus on a window like 'Mousepad'" in message
    assert "'cu@cu-guest: ~' (XTerm, focused)" in message


def test_a_failing_window_listing_is_not_yet_not_a_failure():
    busy = GuestAgentError("xprop failed: BadWindow")
    ready = [window("galculator", "Galculator", focused=True)]
    waited, _ = run(WaitFor(focused="alculator"), ScriptedObserver(windows=[busy, busy, ready]))
    assert waited.polls == 3
    with pytest.raises(ConditionTimeout, match="BadWindow"):
        run(WaitFor(focused="x", timeout=2), ScriptedObserver(windows=[busy]))


def test_screen_changes_compares_with_the_baseline_from_before_the_step():
    before, after = png((0, 0, 90)), png((0, 0, 90), dot=(5, 5))
    # The step already changed the screen by the first look: it holds at once.
    assert run(WaitFor(screen_changes=True), ScriptedObserver(screens=[after]), baseline=before)[0].polls == 1
    # Without a baseline the first look is the reference.
    assert run(WaitFor(screen_changes=True), ScriptedObserver(screens=[before, before, after]))[0].polls == 3
    with pytest.raises(ConditionTimeout, match="stayed as it was"):
        run(WaitFor(screen_changes=True, timeout=1), ScriptedObserver(screens=[before]), baseline=before)


def test_screen_conditions_look_only_inside_their_region():
    before, outside = png((0, 0, 90)), png((0, 0, 90), dot=(35, 25))
    region = Region(x=0, y=0, width=10, height=10)
    with pytest.raises(ConditionTimeout):
        run(WaitFor(screen_changes=True, region=region, timeout=1), ScriptedObserver(screens=[outside]),
            baseline=before)
    with pytest.raises(ValueError, match="not inside the 40x30 screen"):
        run(WaitFor(screen_changes=True, region=Region(x=35, y=0, width=10, height=10)),
            ScriptedObserver(screens=[before]))


def test_screen_settles_needs_the_picture_unchanged_for_the_whole_span():
    a, b, c = png((1, 1, 1)), png((2, 2, 2)), png((3, 3, 3))
    observer = ScriptedObserver(screens=[a, b, c, c, c, c, c, c])
    waited, clock = run(WaitFor(screen_settles=1.0), observer)
    # c first seen at t=0.5; still at t=1.5: four looks at c after it appeared.
    assert clock.now == pytest.approx(1.5) and waited.polls == 7
    blinking = ScriptedObserver(screens=[a, b] * 50)
    with pytest.raises(ConditionTimeout, match="kept changing"):
        run(WaitFor(screen_settles=1.0, timeout=3), blinking)


@pytest.mark.parametrize("fields,message", [
    ({}, "exactly one of"),
    ({"window": "a", "focused": "b"}, "exactly one of"),
    ({"focused": "a", "region": {"x": 0, "y": 0, "width": 1, "height": 1}}, "region goes only with"),
    ({"window": "(unclosed"}, "not a regular expression"),
    ({"screen_settles": 0}, "greater than 0"),
    ({"focused": "a", "timeout": -1}, "greater than 0"),
    ({"focused": "a", "within": 3}, "Extra inputs"),
])
def test_malformed_conditions_are_refused(fields, message):
    with pytest.raises(ValidationError, match=message):
        WaitFor.model_validate(fields)
