"""N workers over a queue of work, stopped by a signal with nothing left behind: the one loop of
the slot scheduler, a study, image warming and a cluster run's dispatch.

Each worker is a thread that takes items until it is given none, or the loop is stopping. The
main thread only waits, on events, never on Thread.join: a join interrupted by Ctrl-C can leave
CPython (< 3.13) believing a thread has ended while it still runs its teardown, and the process
would then exit under it. An item that raises ends its worker; the others go on, and the first
error is raised once every worker has ended.

The interrupt rules, written here once: on the first signal (SIGINT, or SIGTERM and SIGHUP once
runner.owner.raise_on_termination is installed) the loop

1. shields its teardown (runner.interrupts): a second signal is said and waited through;
2. stops taking work, and calls the client's `stop_work`, which kills what the workers are
   blocked on (their VMs), so a worker's blocked call returns. It is called again every half
   second until the workers have ended: a start may define its VM after the first call;
3. waits up to the grace for the workers to end, then gives the client's `drain` the rest of
   it, for teardowns running in the background;
4. says what is still there after the grace, with the `cu-run gc` that removes it, and re-raises
   the interrupt, so the command's own unwinding (reports, exit code 130) follows.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from runner.interrupts import say_on_stderr, shielded

STOP_GRACE_S = 120.0  # after a signal, how long the workers and the teardowns get to finish
WAIT_S = 0.5  # the main thread's longest wait: a signal is handled between two waits

W = TypeVar("W")  # a worker: a slot number, a (host, slot)
T = TypeVar("T")  # an item of work


def taking_from(work: queue.SimpleQueue[T]) -> Callable[[object], T | None]:
    """A take for workers that share WORK, filled before they start: its next item, or None
    once it is empty."""
    def take(_worker: object) -> T | None:
        try:
            return work.get_nowait()
        except queue.Empty:
            return None

    return take


@dataclass
class Workers(Generic[W, T]):
    """The loop, configured by its client. TAKE(w): worker W's next item, or None when W is to
    end (it may block for a while: the loop's own stop is checked between items). DO(w, item):
    runs one item."""

    take: Callable[[W], T | None]
    do: Callable[[W, T], None]
    stop_work: Callable[[], None] = lambda: None
    still_there: Callable[[], list[str]] = list
    drain: Callable[[float], None] = lambda _seconds: None
    worker_ended: Callable[[W], None] = lambda _worker: None  # a worker's own cleanup, however it ends
    name: Callable[[W], str] = str  # its thread's name
    grace_s: float = STOP_GRACE_S
    stopping: threading.Event = field(default_factory=threading.Event)
    say: Callable[[str], None] = say_on_stderr

    def run(self, workers: Sequence[W], render: Callable[[], None] = lambda: None) -> None:
        """Runs a thread per worker until each has ended, calling RENDER between waits. On a
        signal, stops as the module says and re-raises it; otherwise raises the first error an
        item raised, once all have ended."""
        errors: list[BaseException] = []
        finished = [threading.Event() for _ in workers]
        threads = [threading.Thread(target=self._work, args=(worker, done, errors), name=self.name(worker), daemon=True)
                   for worker, done in zip(workers, finished, strict=True)]
        try:
            for thread in threads:  # within the try: a signal may come while they start
                thread.start()
            while pending := [done for done in finished if not done.is_set()]:
                render()
                pending[0].wait(WAIT_S)
            render()
        except KeyboardInterrupt:
            for thread, done in zip(threads, finished, strict=True):
                if thread.ident is None:  # never started: nothing of it to wait for
                    done.set()
            self._stop_all(finished)
            raise
        if errors:
            raise errors[0]

    def _work(self, worker: W, done: threading.Event, errors: list[BaseException]) -> None:
        try:
            while not self.stopping.is_set():
                item = self.take(worker)
                if item is None:
                    return
                self.do(worker, item)
        except BaseException as exc:  # noqa: BLE001 - raised in the main thread once all have ended
            errors.append(exc)
        finally:
            try:
                self.worker_ended(worker)
            finally:
                done.set()

    def _stop_all(self, finished: list[threading.Event]) -> None:
        with shielded(self.still_there, self.say, announce=True):
            self.stopping.set()
            deadline = time.monotonic() + self.grace_s
            while True:
                self.stop_work()
                pending = [done for done in finished if not done.is_set()]
                if not pending or time.monotonic() >= deadline:
                    break
                pending[0].wait(min(WAIT_S, max(0.0, deadline - time.monotonic())))
            self.drain(max(0.0, deadline - time.monotonic()))
            left = self.still_there()
        if left:
            self.say(f"interrupted, and {'; '.join(left)} did not finish tearing down within {self.grace_s:.0f} s; "
                     "`cu-run gc` removes what is left")
