"""What an episode left, on its way into report.html and junit.xml: checked, bounded and made fit
for XML first, since the agent and the guest wrote most of it (a reason, a log, a click's
coordinates, a screenshot's bytes).

- A text is cut to a length (the cut said) and loses every code point XML 1.0 cannot carry.
- A number is used only when it is a finite real number (not a bool) inside its range.
- A file is read only when it is a plain file of the episode's folder, named without a path and
  reached through no link; a log only its last part.
- A trajectory is read a line at a time, split on "\\n" only; a line that is not a JSON object,
  or is over MAX_LINE_BYTES, is skipped and counted.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from runner.scoring.verdict import xml_text

MAX_TEXT = 4000  # characters of one text shown, unless its place asks for less
MAX_SECONDS = 10_000_000  # about four months: no episode or step of a run takes longer
MAX_LINE_BYTES = 1 << 20  # a trajectory line longer than this is skipped
# A file an episode's record names (a screenshot): one name, no path, not hidden.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


def text(value: object, limit: int = MAX_TEXT) -> str:
    """VALUE as text fit for XML and HTML: at most LIMIT characters and a note of the cut, with
    every code point XML 1.0 cannot carry (controls, lone surrogates, noncharacters) replaced."""
    s = value if isinstance(value, str) else str(value)
    if len(s) > limit:
        s = f"{s[:limit]}... ({len(s) - limit} more characters not shown)"
    return xml_text(s)


def html_text(value: object, limit: int = MAX_TEXT) -> str:
    """text(VALUE, LIMIT) escaped for HTML, quotes included: fit for an element and an attribute."""
    return html.escape(text(value, limit))


def failure(exc: BaseException) -> str:
    """What EXC says, bounded and fit for XML: why a part of a report could not be rendered."""
    try:
        said = str(exc)
    except Exception:  # noqa: BLE001 - an exception that cannot say itself is still named
        said = ""
    return text(f"{type(exc).__name__}: {said}", 200)


def number(value: object, low: float = -math.inf, high: float = math.inf) -> float | None:
    """VALUE when it is a finite real number from LOW to HIGH, else None (NaN, an infinity, a bool,
    a string, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        as_float = float(value)
    except OverflowError:
        return None
    return as_float if math.isfinite(as_float) and low <= as_float <= high else None


def duration(value: object) -> float | None:
    """VALUE when it is a duration a run could have measured, in seconds, else None."""
    return number(value, 0, MAX_SECONDS)


def seconds(value: object, digits: int = 1) -> str:
    """A duration for people: "12.3 s", or "? s" when VALUE is not one."""
    d = duration(value)
    return "? s" if d is None else f"{d:.{digits}f} s"


def plain_file(folder: Path, name: object) -> Path | None:
    """FOLDER/NAME when NAME is one plain name (no path, not hidden) and a regular file is there,
    reached through no link; else None."""
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        return None
    path = folder / name
    return path if path.is_file() and not path.is_symlink() else None


def tail(path: Path, limit: int) -> str:
    """The last LIMIT characters of the file at PATH, read from its end (a log may be gigabytes)."""
    with path.open("rb") as f:
        size = f.seek(0, 2)
        start = f.seek(max(0, size - 4 * limit))
        read = f.read().decode("utf-8", errors="replace")
    if start == 0 and len(read) <= limit:
        return read
    return f"(its last {limit} characters, of {size} bytes)\n{read[-limit:]}"


@dataclass
class Steps:
    """A trajectory as far as the report reads it."""

    entries: list[dict] = field(default_factory=list)  # the first steps, each a JSON object
    skipped: int = 0  # lines among those read that are not a JSON object, or too long
    more: int = 0  # lines after the first steps kept, not read


def read_steps(path: Path, keep: int) -> Steps:
    """trajectory.jsonl's first KEEP steps, what was skipped among them, and how many lines follow."""
    steps = Steps()
    if not path.is_file() or path.is_symlink():
        return steps
    with path.open("rb") as f:
        while len(steps.entries) < keep and (line := f.readline(MAX_LINE_BYTES + 1)):
            if len(line) > MAX_LINE_BYTES:
                _skip_rest_of_line(f, line)
                steps.skipped += 1
            elif line.strip():
                entry = _json_object(line)
                if entry is None:
                    steps.skipped += 1
                else:
                    steps.entries.append(entry)
        steps.more = _lines_left(f)
    return steps


def _skip_rest_of_line(f: BinaryIO, read: bytes) -> None:
    while not read.endswith(b"\n") and (read := f.readline(MAX_LINE_BYTES)):
        pass


def _lines_left(f: BinaryIO) -> int:
    count, last = 0, b"\n"
    while chunk := f.read(1 << 20):
        count, last = count + chunk.count(b"\n"), chunk
    return count + (not last.endswith(b"\n"))


def _json_object(line: bytes) -> dict | None:
    try:
        value = json.loads(line.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):  # not JSON, an integer of too many digits, nesting too deep
        return None
    return value if isinstance(value, dict) else None
