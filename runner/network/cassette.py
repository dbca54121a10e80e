"""A cassette: what a recording proxy was answered, one JSON line per answer, keyed by the request
(its method, the URL as the guest asked, its body's sha256: proxy_addon.cassette_key). A replay
answers each request with the first answer recorded for its key.

Standard library only: the proxy's addon reads cassettes in its own interpreter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

CASSETTE = "cassette.jsonl"  # what --net record writes in each episode's folder


def merged(paths: Iterable[Path]) -> bytes:
    """One cassette from several recordings of a task (its trials, in order): each request's first
    answer, which is the one a replay of any of them would give. A line that is not an answer
    raises ValueError, naming its file."""
    kept: dict[str, str] = {}
    for path in paths:
        for key, entry in answers(path):
            kept.setdefault(key, json.dumps(entry, sort_keys=True))
    return "".join(line + "\n" for line in kept.values()).encode()


def check_cassette(path: Path) -> None:
    """Raises ValueError, naming the line, when PATH is not a cassette (what a replay's proxy reads:
    a task's defect, refused by `tasks lint` and the run's plan, never the agent's failure)."""
    for _answer in answers(path):
        pass


def answers(path: Path) -> Iterator[tuple[str, dict]]:
    """PATH's recorded answers, each with its key; ValueError at the first line that is not one."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text (at byte {exc.start}): not a cassette") from None
    for number, line in enumerate(text.splitlines(), 1):
        try:
            entry = json.loads(line)
            key = entry["key"]
            if not isinstance(key, str) or not {"status", "headers", "body"} <= set(entry):
                raise ValueError("not a recorded answer")
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise ValueError(f"{path} line {number} is not a cassette's answer ({str(exc)[:200]})") from None
        yield key, entry
