"""Teardown that finishes whatever signals arrive.

The first Ctrl-C (or SIGTERM, SIGHUP: runner.owner.raise_on_termination) unwinds the run, and
its teardown then destroys every VM and removes every overlay. A second signal, from an
impatient user or a supervisor that sends SIGTERM twice, must not cut that teardown short:
inside `shielded()` it is counted and said, and the teardown goes on. With `announce`, the
teardown says when it begins, so the user (or a supervisor reading stderr) knows the first
signal was heard and that a second is safe. A third means the user
insists: `Insisted` is raised, and its message names what is still there and the `cu-run gc`
command that removes it.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
INSIST_AFTER = 2  # signals during the teardown: the first is said, the second ends the wait


class Insisted(KeyboardInterrupt):
    """Signals kept coming during a teardown: the process leaves now. The message says what is left."""


def say_on_stderr(line: str) -> None:
    """What a teardown says, where a person or a supervisor reads it."""
    print(line, file=sys.stderr, flush=True)


@contextmanager
def shielded(left: Callable[[], list[str]], say: Callable[[str], None] | None = None, *,
             announce: bool = False) -> Iterator[None]:
    """Runs the block (a teardown) with further signals counted instead of raised. LEFT() says what
    would be left if it stopped now; SAY tells the user (stderr by default). ANNOUNCE, for a
    teardown that a signal began, says so once the shield is up. Outside the main thread (where
    Python delivers no signals) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    say = say or say_on_stderr
    seen = 0

    def handler(signum: int, _frame: object) -> None:
        nonlocal seen
        seen += 1
        if seen < INSIST_AFTER:
            say(f"{signal.Signals(signum).name}: still tearing down the VMs; once more leaves them running")
            return
        leftovers = left()
        raise Insisted("left without finishing the teardown: "
                       + ("; ".join(leftovers) if leftovers else "nothing was left")
                       + "; `cu-run gc` removes what a stopped run left")

    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
    for sig in SIGNALS:
        signal.signal(sig, handler)
    try:
        if announce:  # said only now: a signal sent after this line reaches the shield, not the run
            say(f"stopping: tearing down {_count(left())}; a second signal is waited through, a third leaves them")
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _count(things: list[str]) -> str:
    return "what was started" if not things else "1 VM" if len(things) == 1 else f"{len(things)} VMs"
