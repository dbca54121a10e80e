"""One episode's part of report.html: its details (phases, screens, violations, unexpected writes,
checkpoints, recording, the filmstrip of its trajectory, logs) or, past the detailed ones, a line.

Each is rendered on its own from what the episode left, which the agent and the guest wrote.
Whatever that holds (a click at x = 10^30, a broken PNG, gigabytes of log), the worst it gets is
its own row saying it could not be rendered, and the rest of the report stands. What is out of
range but harmless (a NaN duration, a click off the screen, a line that is not JSON) is shown as
such, and said on the episode's row.
"""

from __future__ import annotations

import base64
import collections
import html
import io
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from PIL import Image as PILImage
from PIL import ImageDraw

from runner.records.recording import RECORDING
from runner.records.report_values import (PLAIN_NAME, duration, failure, html_text, number, plain_file, read_steps, seconds,
                                          tail, text)
from runner.records.results import EpisodeRecord

log = logging.getLogger(__name__)

THUMB_WIDTH = 480
FILM_WIDTH = 240
MAX_FILM_FRAMES = 80  # pictures per episode: bounds the report's size on long trajectories
MAX_FILM_STEPS = 400  # steps shown per episode, pictured or not
MAX_ITEMS = 100  # violations, changed paths, checkpoints or phases shown per episode
MAX_LOG_CHARS = 8000
MAX_REASON = 500  # characters of a reason on the episode's row; a longer one is in its details
MAX_PIXELS = 8192 * 8192  # a screenshot larger than this is not decoded
LOGS = ("verify.log", "agent.log", "setup.log")
# The pointer steps drawn on the screen, and the arguments that hold their (x, y) pairs.
POINTER_ARGS = {"click": ("x", "y"), "scroll": ("x", "y"), "move": ("x", "y"), "drag": ("x1", "y1", "x2", "y2")}


def details(out_dir: Path, r: EpisodeRecord, open_: bool = False) -> str:
    """The episode whole, in a <details> of its own; a row saying why when it cannot be rendered."""
    try:
        return _details(out_dir, r, open_)
    except Exception as exc:  # noqa: BLE001 - one episode's leavings must not cost the run its report
        return unrenderable(r, exc)


def line(r: EpisodeRecord) -> str:
    """The episode in one line (a run past MAX_DETAILED_EPISODES)."""
    try:
        return (f"<p id='{anchor(r)}'>#{html_text(r.trial, 20)}: {_outcome(r)} {html_text(r.reason, MAX_REASON)} "
                f"({seconds(r.duration_s, 0)}); its files: <code>{html_text(r.task_id, 200)}/{html_text(r.trial, 20)}/"
                "</code></p>")
    except Exception as exc:  # noqa: BLE001 - as in details
        return unrenderable(r, exc)


def unrenderable(r: EpisodeRecord, exc: Exception) -> str:
    """The row of an episode whose part of the report failed: its outcome, and why, bounded."""
    why = failure(exc)
    log.warning("report.html: %s #%s could not be rendered: %s", text(r.task_id, 200), text(r.trial, 20), why)
    return (f"<p id='{anchor(r)}' class='warn'><b>{html_text(r.task_id, 200)}</b> #{html_text(r.trial, 20)}: "
            f"{_outcome(r)} could not be rendered: {html.escape(why)}</p>")


def anchor(r: EpisodeRecord) -> str:
    """The episode's id in the page (the live view links to it), escaped for an attribute."""
    return f"{html_text(r.task_id, 200)}-{html_text(r.trial, 20)}"


def episode_dir(out_dir: Path, r: EpisodeRecord) -> Path | None:
    """OUT_DIR/TASK/TRIAL, or None when the task id is no plain name (it could point elsewhere)."""
    if not (isinstance(r.task_id, str) and PLAIN_NAME.fullmatch(r.task_id)):
        return None
    if isinstance(r.trial, bool) or not isinstance(r.trial, int):
        return None
    ep = out_dir / r.task_id / str(r.trial)
    return None if ep.is_symlink() else ep


def _outcome(r: EpisodeRecord) -> str:
    outcome = html_text(r.outcome, 40)
    return f"<span class='{outcome}'>{outcome}</span>"


def _details(out_dir: Path, r: EpisodeRecord, open_: bool) -> str:
    notes: collections.Counter[str] = collections.Counter()  # what it left out of range, said on its row
    parts = []
    if r.phases:
        parts.append(_phases(r.phases, notes))
    if len(r.reason) > MAX_REASON:
        parts.append(f"<h3>Reason</h3><pre>{html_text(r.reason, MAX_LOG_CHARS)}</pre>")
    ep = episode_dir(out_dir, r)
    if ep is None:
        notes["its task id is not a plain folder name: its files are not shown"] += 1
    else:
        parts.append(_screens(ep, notes))
    parts += [_violations(r.violations), _changed(r.changed), _checkpoints(r.checkpoints)]
    if ep is not None:
        parts += [_recording_link(ep), _filmstrip(ep, notes), _logs(ep)]
    if duration(r.duration_s) is None:
        notes[f"its duration ({text(r.duration_s, 40)}) is not a number of seconds"] += 1
    intervened = " <span class=warn>intervened: a person used the mouse or keyboard</span>" if r.intervened else ""
    head = (f"<details id='{anchor(r)}'{' open' if open_ else ''}><summary><b>{html_text(r.task_id, 200)}</b> "
            f"#{html_text(r.trial, 20)}: {_outcome(r)} {html_text(r.reason, MAX_REASON)} ({seconds(r.duration_s, 0)})"
            f"{intervened}{_said_notes(notes)}</summary>")
    return "\n".join([head, *(p for p in parts if p), "</details>"])


def _said_notes(notes: collections.Counter[str]) -> str:
    if not notes:
        return ""
    said = "; ".join(note + (f" (x{n})" if n > 1 else "") for note, n in notes.items())
    return f" <span class='warn'>[{html_text(said, 1000)}]</span>"


def _more(total: int, shown: int) -> str:
    return f"<li>... and {total - shown} more</li>" if total > shown else ""


def _phases(phases: dict, notes: collections.Counter[str]) -> str:
    items = list(phases.items())
    if any(duration(v) is None for _k, v in items):
        notes["a phase's time is not a number of seconds"] += 1
    shown = ", ".join(f"{text(k, 60)} {seconds(v)}" for k, v in items[:MAX_ITEMS])
    return "<p>phases: " + html.escape(shown) + ("..." if len(items) > MAX_ITEMS else "") + "</p>"


def _violations(violations: list) -> str:
    if not violations:
        return ""
    items = []
    for v in violations[:MAX_ITEMS]:
        v = v if isinstance(v, dict) else {"detail": v}
        items.append(f"<li><b>{html_text(v.get('rule', ''), 200)}</b> (step {html_text(v.get('step'), 20)}): "
                     f"{html_text(v.get('detail', ''), 1000)}</li>")
    return "<h3>Safety violations</h3><ul>" + "".join(items) + _more(len(violations), MAX_ITEMS) + "</ul>"


def _changed(changed: list) -> str:
    if not changed:
        return ""
    return ("<h3>Changed outside the allowed paths</h3><ul>" + "".join(
        f"<li>{html_text(c, 1000)}</li>" for c in changed[:MAX_ITEMS]) + _more(len(changed), MAX_ITEMS) + "</ul>")


def _checkpoints(checkpoints: dict) -> str:
    if not checkpoints:
        return ""
    items = [f"<li>{html_text(name, 200)}: <span class='{'pass' if ok is True else 'fail'}'>"
             f"{'pass' if ok is True else 'fail'}</span></li>" for name, ok in list(checkpoints.items())[:MAX_ITEMS]]
    return "<h3>Checkpoints</h3><ul>" + "".join(items) + _more(len(checkpoints), MAX_ITEMS) + "</ul>"


def _screens(ep: Path, notes: collections.Counter[str]) -> str:
    figures = [f"<figure>{_img(path, THUMB_WIDTH, notes)}<figcaption>{name}</figcaption></figure>"
               for name in ("initial", "final") if (path := plain_file(ep, f"{name}.png")) is not None]
    return "<div class='shots'>" + "".join(figures) + "</div>" if figures else ""


def _recording_link(ep: Path) -> str:
    """A link to the episode's screen recording (run --record), relative to the report beside it."""
    path = plain_file(ep, RECORDING)
    if path is None:
        return ""
    href = f"{quote(ep.parent.name)}/{quote(ep.name)}/{RECORDING}"
    return f"<p><a href='{html.escape(href)}'>screen recording</a> ({path.stat().st_size / 2**20:.1f} MiB)</p>"


def _logs(ep: Path) -> str:
    shown = []
    for name in LOGS:
        if (path := plain_file(ep, name)) is not None:
            shown.append(f"<h3>{name}</h3><pre>{html_text(tail(path, MAX_LOG_CHARS), MAX_LOG_CHARS + 100)}</pre>")
    return "\n".join(shown)


# -- the filmstrip


@dataclass(frozen=True)
class _Mark:
    """Where a pointer step acted: a point (x, y) or a line (x1, y1, x2, y2) on the screen, or
    None and what it was when that is off the screen or no number."""

    at: tuple[int, ...] | None
    off_screen: str = ""


def _filmstrip(ep: Path, notes: collections.Counter[str]) -> str:
    """Each step with its arguments, result and duration; a screenshot step with its picture, and
    each later click, drag and scroll drawn on the screen as the agent last saw it."""
    steps = read_steps(ep / "trajectory.jsonl", MAX_FILM_STEPS)
    if steps.skipped:
        notes["a trajectory line that is not a JSON object, skipped"] += steps.skipped
    if not steps.entries and not steps.skipped:
        return ""
    frames, pictured = [], 0
    last: tuple[Path, tuple[int, int]] | None = None  # the last screenshot and its size
    for entry in steps.entries:
        picture, said = "", ""
        if "screenshot" in entry:
            shot = plain_file(ep, entry["screenshot"])
            size = _size(shot) if shot is not None else None
            if shot is None or size is None:
                notes["a screenshot that is missing or unreadable"] += 1
                said = f"screenshot {text(entry['screenshot'], 80)}: missing or unreadable"
            else:
                last = (shot, size)
                if pictured < MAX_FILM_FRAMES:
                    picture, pictured = _img(shot, FILM_WIDTH, notes), pictured + 1
        elif last is not None and (mark := _mark(entry, last[1])) is not None:
            if mark.at is None:
                notes["a pointer step off the screen, not drawn"] += 1
                said = mark.off_screen
            elif pictured < MAX_FILM_FRAMES:
                # Where a click, drag or scroll went, drawn on the screen as the agent last saw it.
                picture, pictured = _img(last[0], FILM_WIDTH, notes, [mark.at]), pictured + 1
        if "duration_s" in entry and duration(entry["duration_s"]) is None:
            notes["a step's time is not a number of seconds"] += 1
        frames.append(_frame(entry, picture, said))
    total = len(steps.entries) + steps.more
    return (f"<h3>Trajectory ({total} steps)</h3>"
            + (f"<p>the first {len(steps.entries)} are shown</p>" if steps.more else "")
            + (f"<p class='warn'>{_lines(steps.skipped)} skipped: not a JSON object</p>" if steps.skipped else "")
            + "<div class='film'>" + "".join(frames) + "</div>")


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _frame(entry: dict, picture: str, said: str) -> str:
    label = "human" if entry.get("intervention") else f"{text(entry.get('step'), 20)}. {text(entry.get('tool', ''), 80)}"
    args = text(_json(entry.get("arguments", {})), 200)
    warn = f"<br><span class='warn'>{html.escape(said)}</span>" if said else ""
    return (f"<div class='frame'>{picture}<b>{html.escape(label)}</b><br>{html.escape(args)}{warn}"
            f"<br><i>{html_text(entry.get('result', ''), 120)}</i> ({seconds(entry.get('duration_s', 0), 2)})</div>")


def _json(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "(arguments that are not JSON)"


def _mark(entry: dict, size: tuple[int, int]) -> _Mark | None:
    """Where a pointer step acted, on a screen of SIZE; None for any other step."""
    action, args = entry.get("action"), entry.get("arguments")
    keys = POINTER_ARGS.get(action) if isinstance(action, str) else None
    if keys is None or not isinstance(args, dict):
        return None
    values = [args.get(k) for k in keys]
    at = [number(v, 0, size[i % 2] - 1) for i, v in enumerate(values)]
    if any(c is None for c in at):
        where = ", ".join(text(v, 40) for v in values)
        return _Mark(None, f"({where}) is off the {size[0]}x{size[1]} screen: not drawn")
    return _Mark(tuple(round(c) for c in at if c is not None))


def _size(path: Path) -> tuple[int, int] | None:
    """A screenshot's size, from its header; None when it is no PNG or too large to decode."""
    try:
        with PILImage.open(path, formats=["PNG"]) as image:
            width, height = image.size
    except Exception:  # noqa: BLE001 - the guest's pixels may be anything
        return None
    return (width, height) if 0 < width and 0 < height and width * height <= MAX_PIXELS else None


def _img(path: Path, width: int, notes: collections.Counter[str], marks: Sequence[tuple[int, ...]] = ()) -> str:
    """An <img> with the picture inline: a JPEG thumbnail WIDTH pixels wide, MARKS drawn on it
    (a ring at each point, a line with a ring at its end for each drag)."""
    try:
        if _size(path) is None:
            raise ValueError("no PNG, or too large")
        with PILImage.open(path, formats=["PNG"]) as source:
            image = source.convert("RGB")
        _draw(image, marks)
        image.thumbnail((width, width * 4))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=70)
    except Exception:  # noqa: BLE001 - the guest's pixels may be anything: a truncated PNG, a bomb
        notes["a picture that could not be read"] += 1
        return f"<p>(unreadable {html_text(path.name, 200)})</p>"
    data = base64.b64encode(buffer.getvalue()).decode()
    return f"<img alt='{html_text(path.name, 200)}' width='{image.width}' src='data:image/jpeg;base64,{data}'>"


def _draw(image: PILImage.Image, marks: Sequence[tuple[int, ...]]) -> None:
    draw = ImageDraw.Draw(image)
    radius = max(6, image.width // 80)
    bounds = (image.width, image.height)
    for mark in marks:
        if not all(0 <= c < bounds[i % 2] for i, c in enumerate(mark)):
            continue  # off this picture: the caller said so, nothing is drawn
        if len(mark) == 4:
            draw.line(mark, fill=(255, 0, 0), width=max(2, radius // 3))
        x, y = mark[-2], mark[-1]
        draw.ellipse((x - radius, y - radius, x + radius, y + radius), outline=(255, 0, 0), width=max(2, radius // 3))
