"""network.jsonl, an episode's proxy log, bounded against a guest that would fill the host with
it (docs/network.md). The proxy's addon writes it in mitmproxy's own interpreter, so this file uses
the standard library only; the runner reads it back with `read_entries`.

Each line is a JSON object: `t` (the wall clock), `mono` (the host's monotonic clock), `verdict`,
and what is known of the request (method, url, status, bytes, stage, reason). What the guest wrote
cannot make it large:
- every string is cut to MAX_FIELD characters as JSON writes it (escapes counted), marked as cut;
- at most MAX_LINES lines are written. Past them nothing more is, except one last line, verdict
  `dropped`, rewritten in place as the count grows: how many lines were not written, by verdict,
  and the `mono` of the first and the last refusal among them, so a refusal past the cap is still
  the agent's violation.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

MAX_FIELD = 2048  # characters of one string in a line, as JSON writes it
MAX_LINES = 10_000  # lines written per episode; what follows is counted in the last line
TUNNEL = "tunnel"  # a line's field: the refused tunnel (its client connection's id) it was written in
DROPPED = "dropped"
SUMMARY_WIDTH = 512  # the `dropped` line, padded to this, so that rewriting it in place never tears it


def bounded(text: str, limit: int = MAX_FIELD) -> str:
    """TEXT, or its longest start whose JSON form fits LIMIT characters, marked as cut."""
    if len(text) <= limit and len(json.dumps(text)) - 2 <= limit:
        return text
    mark = f"...[cut from {len(text)} characters]"
    budget = limit - len(mark)
    low, high = 0, min(len(text), budget)
    while low < high:  # the longest start that fits: an escape may take up to 12 characters
        middle = (low + high + 1) // 2
        if len(json.dumps(text[:middle])) - 2 <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + mark


class BoundedLog:
    """Appends entries to PATH as JSON lines, at most MAX_LINES of them, then counts the rest."""

    def __init__(self, path: Path, max_lines: int = MAX_LINES, wall_offset_s: float = 0.0) -> None:
        self.path, self.max_lines = path, max_lines
        self.wall_offset_s = wall_offset_s  # a frozen clock's: the guest's time minus the host's
        self.lines = 0
        self.dropped: dict[str, int] = {}
        self.refused_mono: list[float] = []  # of the refusals dropped: the first and the last
        self._summary_at: int | None = None
        self._lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        # t: the wall clock, for a person (at a frozen clock, the guest's: the task's instant on);
        # mono: the host's monotonic clock, which every process shares: what the runner judges the
        # agent's time by. To the microsecond: rounded to the millisecond, a line written just
        # before the agent's turn ended could be stamped after it, and not be its violation.
        t, mono = round(time.time() + self.wall_offset_s, 3), round(time.monotonic(), 6)
        line = {"t": t, "mono": mono, **{k: bounded(v) if isinstance(v, str) else v for k, v in entry.items()}}
        with self._lock:
            if self.lines < self.max_lines:
                with self.path.open("a") as out:
                    out.write(json.dumps(line, sort_keys=True) + "\n")
                self.lines += 1
                return
            verdict = str(line.get("verdict"))
            self.dropped[verdict] = self.dropped.get(verdict, 0) + 1
            if verdict == "refused":
                self.refused_mono = [self.refused_mono[0] if self.refused_mono else mono, mono]
            self._write_summary(t, mono)

    def _write_summary(self, t: float, mono: float) -> None:
        summary = json.dumps({"t": t, "mono": mono, "verdict": DROPPED, "lines": self.max_lines,
                              "dropped": self.dropped, "refused_mono": self.refused_mono or None}, sort_keys=True)
        with self.path.open("r+b") as out:
            if self._summary_at is None:
                self._summary_at = out.seek(0, 2)
            out.seek(self._summary_at)
            out.write((summary.ljust(SUMMARY_WIDTH - 1) + "\n").encode("ascii"))


def read_entries(path: Path) -> list[dict[str, Any]]:
    """PATH's complete lines, read back: a line the proxy is still writing is not one yet, and one
    torn or not an object (the summary rewritten in place while it is read) is skipped."""
    entries = []
    for line in path.read_bytes().decode("utf-8", errors="replace").split("\n")[:-1]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries
