"""A cassette: what a recording proxy was answered, one JSON line per answer, keyed by the request
(its method, the URL as the guest asked, its body's sha256: proxy_addon.cassette_key). A replay
answers each request with the first answer recorded for its key.

Standard library only: the proxy's addon reads cassettes in its own interpreter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

CASSETTE = "cassette.jsonl"  # what --net record writes in each episode's folder


def merged(paths: Iterable[Path]) -> bytes:
    """One cassette from several recordings of a task (its trials, in order): each request's first
    answer, which is the one a replay of any of them would give. A line that is not an answer
    raises ValueError, naming its file."""
    kept: dict[str, str] = {}
    for path in paths:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            try:
                entry = json.loads(line)
                key = entry["key"]
                if not isinstance(key, str) or not {"status", "headers", "body"} <= set(entry):
                    raise ValueError("not a recorded answer")
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path} line {number} is not a cassette's answer ({exc})") from None
            kept.setdefault(key, json.dumps(entry, sort_keys=True))
    return "".join(line + "\n" for line in kept.values()).encode()
