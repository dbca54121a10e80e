"""Standby VMs (runner.runs.standby): a slot's next VM made ready in the background, handed to
the next episode once, and never left behind. FakeVm stands in for EpisodeVM: it records what
was done to it."""

from __future__ import annotations

import logging
import threading
from types import SimpleNamespace

from runner.agents.builtin import NopAgent
from runner.errors import GuestUnreachable, InfraError
from runner.runs import scheduler as harness_module
from runner.runs.pool_config import PoolConfig
from runner.runs.scheduler import SlotScheduler
from runner.runs.standby import Standbys


class FakeVm:
    def __init__(self, name="cu-warm-0", *, fail_start=None, fail_warm_up=None, gone_later=None,
                 hold: threading.Event | None = None):
        self.name = name
        self.done: list[str] = []
        self.timings = SimpleNamespace(phases={"restore": 0.5})
        self._fail_start, self._fail_warm_up, self._gone_later, self._hold = fail_start, fail_warm_up, gone_later, hold

    def start(self):
        if self._hold is not None:
            self._hold.wait(5)
        self.done.append("start")
        if self._fail_start:
            self.done.append("teardown")  # as EpisodeVM.start does on failure
            raise self._fail_start

    def warm_up(self):
        self.done.append("warm_up")
        if self._fail_warm_up:
            raise self._fail_warm_up

    def still_ready(self):
        self.done.append("still_ready")
        if self._gone_later:
            raise self._gone_later

    def teardown(self):
        self.done.append("teardown")
        return []


def test_the_next_episode_gets_a_started_and_warmed_vm_once():
    standbys, vm = Standbys(), FakeVm()
    standbys.prepare(0, lambda: vm)
    taken, waited = standbys.take(0, threading.Event())
    assert taken is vm and waited >= 0
    assert vm.done == ["start", "warm_up", "still_ready"]
    assert standbys.take(0, threading.Event()) == (None, 0.0)  # one episode only


def test_a_slot_with_a_standby_does_not_make_another():
    standbys, first = Standbys(), FakeVm("a")
    standbys.prepare(0, lambda: first)
    standbys.prepare(0, lambda: FakeVm("b"))
    assert standbys.take(0, threading.Event())[0] is first


def test_no_free_warm_state_means_no_standby():
    standbys = Standbys()
    standbys.prepare(0, lambda: None)
    assert standbys.take(0, threading.Event()) == (None, 0.0)


def test_a_standby_that_failed_to_start_is_dropped_and_said(caplog):
    standbys, vm = Standbys(), FakeVm(fail_start=InfraError("restore failed"))
    standbys.prepare(0, lambda: vm)
    with caplog.at_level(logging.WARNING):
        assert standbys.take(0, threading.Event())[0] is None
    assert "restore failed" in caplog.text and vm.done == ["start", "teardown"]


def test_a_warm_up_that_fails_tears_the_standby_down():
    standbys, vm = Standbys(), FakeVm(fail_warm_up=InfraError("warm-up exited 1"))
    standbys.prepare(0, lambda: vm)
    assert standbys.take(0, threading.Event())[0] is None
    assert vm.done == ["start", "warm_up", "teardown"]


def test_a_standby_no_longer_ready_is_torn_down_not_handed_over():
    standbys, vm = Standbys(), FakeVm(gone_later=GuestUnreachable("the agent does not answer"))
    standbys.prepare(0, lambda: vm)
    assert standbys.take(0, threading.Event())[0] is None
    assert vm.done == ["start", "warm_up", "still_ready", "teardown"]


def test_a_stopped_run_does_not_wait_for_or_keep_a_standby():
    standbys, hold, stop = Standbys(), threading.Event(), threading.Event()
    vm = FakeVm(hold=hold)
    standbys.prepare(0, lambda: vm)
    stop.set()
    threading.Timer(0.3, hold.set).start()
    assert standbys.take(0, stop)[0] is None
    assert vm.done == ["start", "warm_up", "teardown"]


def test_an_unused_standby_is_torn_down_once_made():
    standbys, hold = Standbys(), threading.Event()
    vm = FakeVm(hold=hold)
    standbys.prepare(3, lambda: vm)
    threading.Timer(0.2, hold.set).start()
    standbys.discard_all()
    assert vm.done == ["start", "warm_up", "teardown"]
    standbys.discard(3)  # nothing left: a no-op
    assert vm.done.count("teardown") == 1


# -- the harness's side


def warm(slot: int):
    return SimpleNamespace(state=SimpleNamespace(slot=slot))


def make_harness(tmp_path, spares: tuple, *, standby: bool = True) -> SlotScheduler:
    image = SimpleNamespace(name="img", path=lambda *_: tmp_path)
    config = PoolConfig(image=image, accel="tcg", vm_pool=1, run_id="t", warm={0: warm(0)}, spare_warm=spares,
                        standby=standby)
    return SlotScheduler(host=None, settings=None, pool=config, agent=NopAgent(), out_dir=tmp_path)


class RecordingEpisodeVm(FakeVm):
    """What the harness constructs for a standby: the warm state it was given, and its lock."""

    def __init__(self, *_args, warm, warm_lock, **_kwargs):
        super().__init__(f"cu-warm-{warm.state.slot}")
        self.warm, self.warm_lock = warm, warm_lock


def test_the_harness_makes_a_standby_on_a_spare_while_the_slot_holds_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr("runner.images.warm_state.warm_root", lambda image: tmp_path / "warm")
    monkeypatch.setattr(harness_module, "EpisodeVM", RecordingEpisodeVm)
    h = make_harness(tmp_path, (warm(1),))
    _own, own_lock = h._claim_warm(0)  # the running episode's
    h._queue.put(("task", 1))  # more work to come
    h._prepare_standby(0)
    vm, _ = h._standbys.take(0, threading.Event())
    assert vm.warm.state.slot == 1 and vm.warm_lock is not None
    vm.warm_lock.release()
    own_lock.release()


def test_no_standby_without_more_work_without_spares_or_when_turned_off(tmp_path, monkeypatch):
    monkeypatch.setattr("runner.images.warm_state.warm_root", lambda image: tmp_path / "warm")
    monkeypatch.setattr(harness_module, "EpisodeVM", RecordingEpisodeVm)
    for h, work in ((make_harness(tmp_path, (warm(1),)), False), (make_harness(tmp_path, ()), True),
                    (make_harness(tmp_path, (warm(1),), standby=False), True)):
        if work:
            h._queue.put(("task", 1))
        h._prepare_standby(0)
        assert h._standbys.take(0, threading.Event()) == (None, 0.0)


def test_a_slots_last_vm_is_torn_down_when_the_next_agent_starts_or_the_run_drains(tmp_path, monkeypatch):
    monkeypatch.setattr(harness_module, "EpisodeVM", RecordingEpisodeVm)
    h = make_harness(tmp_path, ())
    last, other = FakeVm("cu-last-0"), FakeVm("cu-last-1")
    h._last_vm[0], h._last_vm[1] = (last, tmp_path), (other, tmp_path)
    h._agent_starts(0)  # slot 0's next episode reached its agent
    assert list(h._last_vm) == [1]  # slot 1's waits on
    h.drain(timeout=10)
    assert last.done == ["teardown"] and other.done == ["teardown"] and h._last_vm == {}


def test_standbys_only_when_the_pool_leaves_a_core(monkeypatch):
    from runner.runs import standby

    monkeypatch.setattr(standby.os, "cpu_count", lambda: 2)
    assert standby.leaves_a_core(1) and not standby.leaves_a_core(2)
    monkeypatch.setattr(standby.os, "cpu_count", lambda: None)
    assert not standby.leaves_a_core(1)


def test_a_standby_waits_for_the_teardown_that_frees_its_warm_state():
    """A pool of one on two warm states: while the slot's last VM is torn down, neither state is
    free; the standby is made as soon as that teardown ends, not skipped for this episode."""
    standbys, vm, freed = Standbys(), FakeVm(), threading.Event()
    free = []
    teardown = threading.Thread(target=lambda: (freed.wait(5), free.append("state 0")))
    teardown.start()
    standbys.prepare(0, lambda: vm if free else None, after=teardown)
    assert standbys.has(0)  # pending: the next episode will wait for it rather than start its own
    threading.Timer(0.2, freed.set).start()
    taken, waited = standbys.take(0, threading.Event())
    assert taken is vm and vm.done == ["start", "warm_up", "still_ready"] and waited > 0


def test_a_teardown_that_frees_nothing_leaves_the_slot_without_a_standby():
    standbys, done = Standbys(), threading.Thread(target=lambda: None)
    done.start()
    done.join()
    standbys.prepare(0, lambda: None, after=done)  # already over, and nothing free: no standby
    assert not standbys.has(0)
    running = threading.Thread(target=threading.Event().wait, args=(0.2,))  # alive for a moment
    running.start()
    standbys.prepare(1, lambda: None, after=running)
    assert standbys.take(1, threading.Event())[0] is None  # it ended and still nothing was free
