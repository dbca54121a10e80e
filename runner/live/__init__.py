"""The live view (`--live`): a page of tiles, one per slot, each slot's screen full-size through
noVNC, and with --live-control a person's hand on the mouse and keyboard, recorded."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.live.board import LiveSource


@dataclass(frozen=True)
class LiveOptions:
    port: int = 0  # 0: any free port
    host: str = "127.0.0.1"
    control: bool = False


LOOPBACK_ONLY_WARNING = (
    "the live view listens on {host}, beyond this machine: anyone who can reach it and holds the token sees "
    "every screen{control}. The token travels in plain HTTP, so use this only on a network you trust "
    "(docs/live.md)."
)


def check_live_flags(live: bool, port: int, host: str, control: bool) -> None:
    """Refuses live-view flags that cannot work, before any VM starts."""
    from runner.errors import UsageError

    if (control or port or host != LiveOptions.host) and not live:
        raise UsageError("--live-control, --live-port and --live-host go with --live", fix="add --live")
    if not 0 <= port <= 65535:
        raise UsageError(f"--live-port must be a port number (0 for any free one), not {port}")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@contextmanager
def serving(source: LiveSource, options: LiveOptions, say: Callable[[str], None], run_dir: Path | None = None
            ) -> Iterator[object]:
    """Serves SOURCE's live view for the body's duration; SAY gets the one line with its URL
    (and a warning first when it listens beyond loopback)."""
    from runner.live.server import LiveServer

    if not is_loopback(options.host):
        say("warning: " + LOOPBACK_ONLY_WARNING.format(
            host=options.host, control=" and can take its mouse and keyboard" if options.control else ""))
    with LiveServer(source, host=options.host, port=options.port, control=options.control, run_dir=run_dir) as live:
        say(f"live: {live.url}")
        yield live
