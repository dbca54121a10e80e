"""Who owns a VM: this process, identified so that gc can tell a dead owner from a live one.

A pid alone can be reused after a crash; pid plus its start time (clock ticks since
boot, /proc/PID/stat field 22) cannot, within one boot.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Owner:
    pid: int
    start: int

    def alive(self) -> bool:
        return process_start(self.pid) == self.start


def process_start(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def me() -> Owner:
    pid = os.getpid()
    start = process_start(pid)
    assert start is not None
    return Owner(pid, start)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised in the main thread so every `with` block tears down."""


def raise_on_termination() -> None:
    """Makes SIGINT, SIGTERM and SIGHUP unwind the main thread, so every `with` tears down."""

    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
    # A shell starts background jobs with SIGINT ignored, and Python keeps it so: restore Ctrl-C.
    signal.signal(signal.SIGINT, signal.default_int_handler)
