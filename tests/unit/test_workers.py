"""The one worker loop (runner/workers.py): items over N workers, errors raised once all have ended,
and the interrupt rules, with real signals sent to this process (SIGINT: KeyboardInterrupt)."""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

import pytest

from runner.workers import Workers, taking_from


def from_queue(items) -> tuple[queue.SimpleQueue, object]:
    q: queue.SimpleQueue = queue.SimpleQueue()
    for item in items:
        q.put(item)
    return q, taking_from(q)


def signal_when(ready: threading.Event, *signals: int, gap: float = 0.05) -> None:
    """Sends SIGNALS to this process once READY is set (the workers are where the test wants them)."""
    def send() -> None:
        ready.wait(10)
        for sig in signals:
            os.kill(os.getpid(), sig)
            threading.Event().wait(gap)

    threading.Thread(target=send, daemon=True).start()


def test_every_item_runs_once_over_the_workers_and_each_worker_ends_once():
    _q, take = from_queue(range(20))
    ran, ended, lock = [], [], threading.Lock()

    def do(worker, item):
        with lock:
            ran.append((worker, item))

    renders = []
    Workers(take, do, worker_ended=ended.append).run([0, 1, 2], render=lambda: renders.append(1))
    assert sorted(item for _w, item in ran) == list(range(20))
    assert sorted(ended) == [0, 1, 2] and renders  # rendered at least once, at the end


def test_an_item_that_raises_ends_its_worker_the_others_finish_and_it_is_raised_after():
    _q, take = from_queue(["boom", *range(6)])
    done = []

    def do(worker, item):
        if item == "boom":
            raise ValueError("the item failed")
        time.sleep(0.01)
        done.append(item)

    with pytest.raises(ValueError, match="the item failed"):
        Workers(take, do).run([0, 1])
    assert sorted(done) == list(range(6))  # the other worker took the rest


def test_a_signal_stops_the_work_unblocks_the_workers_drains_and_is_reraised():
    _q, take = from_queue(range(10))
    blocked, released = threading.Event(), threading.Event()
    calls, started = [], []

    def do(worker, item):
        started.append(item)
        blocked.set()
        released.wait(30)  # a VM's call that only killing the VM returns from

    def stop_work():
        calls.append("stop_work")
        released.set()

    said = []
    loop = Workers(take, do, stop_work=stop_work, drain=lambda seconds: calls.append(f"drain {seconds > 0}"),
                   still_there=lambda: [] if released.is_set() else ["VM cu-x-0"], say=said.append)
    signal_when(blocked, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        loop.run([0, 1])
    assert calls[0] == "stop_work" and calls[-1] == "drain True"
    assert len(started) <= 2  # no item was taken once it was stopping
    assert said[0].startswith("stopping: tearing down")


def test_a_second_signal_during_the_teardown_is_waited_through():
    _q, take = from_queue([1])
    blocked, released, teardown_over = threading.Event(), threading.Event(), threading.Event()

    def do(_worker, _item):
        blocked.set()
        released.wait(30)

    def drain(_seconds):
        os.kill(os.getpid(), signal.SIGINT)  # the second signal, during the teardown by construction
        threading.Event().wait(0.1)  # its handler runs in this (the main) thread meanwhile
        teardown_over.set()

    said = []
    loop = Workers(take, do, stop_work=released.set, drain=drain, say=said.append)
    signal_when(blocked, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        loop.run([0])
    assert teardown_over.is_set()
    assert any("still tearing down" in line for line in said)


def test_stop_work_is_repeated_until_a_late_start_is_caught():
    # A VM defined after the first stop_work: only a later call kills it.
    _q, take = from_queue([1])
    blocked, defined, killed = threading.Event(), threading.Event(), threading.Event()

    def do(_worker, _item):
        blocked.set()
        defined.wait(30)  # the start defines its VM only now
        killed.wait(30)

    calls = []

    def stop_work():
        calls.append(1)
        if len(calls) == 1:
            defined.set()  # too late for this call
        else:
            killed.set()

    signal_when(blocked, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        Workers(take, do, stop_work=stop_work, say=lambda _line: None).run([0])
    assert killed.is_set() and len(calls) >= 2


def test_what_is_still_there_after_the_grace_is_said_with_gc():
    _q, take = from_queue([1])
    blocked = threading.Event()

    def do(_worker, _item):
        blocked.set()
        threading.Event().wait(30)  # never returns in time

    said = []
    loop = Workers(take, do, still_there=lambda: ["VM cu-x-0"], grace_s=0.3, say=said.append)
    signal_when(blocked, signal.SIGINT)
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        loop.run([0])
    assert time.monotonic() - t < 10  # the grace, not the stuck worker, bounds the wait
    assert "VM cu-x-0 did not finish tearing down within 0 s" in said[-1] and "cu-run gc" in said[-1]


def test_a_stop_from_elsewhere_ends_the_workers_between_items():
    q, take = from_queue(range(100))
    stopping = threading.Event()
    done = []

    def do(_worker, item):
        done.append(item)
        if item == 3:
            stopping.set()

    Workers(take, do, stopping=stopping).run([0])
    assert done == [0, 1, 2, 3] and q.qsize() == 96
