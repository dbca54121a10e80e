"""Teardown that finishes whatever signals arrive (runner/interrupts.py), with real signals sent to
this process: a second one is said and the teardown goes on; a third ends it, naming what is left."""

import os
import signal
import threading

import pytest

from runner.interrupts import Insisted, shielded


def send_soon(*signals: int, gap: float = 0.05) -> None:
    def send() -> None:
        for sig in signals:
            threading.Event().wait(gap)
            os.kill(os.getpid(), sig)

    threading.Thread(target=send, daemon=True).start()


def test_one_more_signal_is_said_and_the_teardown_finishes():
    said, finished = [], threading.Event()
    with shielded(lambda: ["VM cu-x"], say=said.append):
        send_soon(signal.SIGTERM)
        threading.Event().wait(0.5)  # the teardown's work, during which the signal arrives
        finished.set()
    assert finished.is_set() and len(said) == 1 and "still tearing down" in said[0]


def test_announce_says_the_teardown_began_only_once_a_signal_would_reach_the_shield():
    said, handlers = [], []

    def say(line: str) -> None:
        said.append(line)
        handlers.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    with shielded(lambda: ["VM cu-a", "VM cu-b"], say=say, announce=True):
        assert said == ["stopping: tearing down 2 VMs; a second signal is waited through, a third leaves them"]
    assert handlers[0] is not before  # the shield was up when it was said
    quiet = []
    with shielded(lambda: ["VM cu-a"], say=quiet.append):
        pass
    assert quiet == []  # a teardown on a normal exit says nothing


def test_insisting_ends_the_teardown_and_names_what_is_left_and_gc():
    with pytest.raises(Insisted) as info:
        with shielded(lambda: ["VM cu-run-0", "episode folder /x"], say=lambda _l: None):
            send_soon(signal.SIGTERM, signal.SIGINT)
            threading.Event().wait(5)
    assert "VM cu-run-0; episode folder /x" in str(info.value) and "cu-run gc" in str(info.value)


def test_the_handlers_are_restored_after():
    before = signal.getsignal(signal.SIGTERM)
    with shielded(lambda: []):
        pass
    assert signal.getsignal(signal.SIGTERM) is before
