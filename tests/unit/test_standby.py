"""Standby VMs (runner.runs.standby): a slot's next VM made ready in the background, handed to
the next episode once, and never left behind. FakeVm stands in for EpisodeVM: it records what
was done to it; through the supply, its factory makes them (tests/fakes/episode_vms.py)."""

from __future__ import annotations

import logging
import threading

from runner.errors import GuestUnreachable, InfraError
import pytest

from fakes.episode_vms import FakeVm, FakeVmFactory, fake_warm
from runner.runs.standby import Standbys
from runner.runs.vm_supply import SupplyOptions, VmSupply


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


# -- through the VM supply (runner.runs.vm_supply)


@pytest.fixture
def warm(tmp_path):
    return lambda slot: fake_warm(tmp_path, slot)


@pytest.fixture
def supply(warm):
    def make(spares: tuple, *, standby: bool = True, more_work: bool = True) -> VmSupply:
        options = SupplyOptions(slots=1, warm={0: warm(0)}, spare_warm=spares, standby=standby)
        return VmSupply(FakeVmFactory(), options, threading.Event(), more_work=lambda: more_work)
    return make


def test_a_slot_gets_a_standby_made_on_a_spare_while_it_holds_its_own(tmp_path, supply, warm):
    vms = supply((warm(1),))
    first = vms.claim(0, tmp_path)
    assert first.vm.warm.state.slot == 0 and first.vm.done == []  # unstarted: its episode starts it
    vms.agent_started(0)  # the standby is begun while this episode's agent works
    vms.give_back(0, first.vm, tmp_path, torn_down=False)
    assert first.vm.done == []  # it waits for the next episode's agent: a standby is there to start on
    phases = []
    second = vms.claim(0, tmp_path / "next", phase=phases.append)
    assert second.vm.warm.state.slot == 1 and second.vm.done == ["start", "warm_up", "still_ready"]
    assert phases == ["standby"] and second.phases["standby_restore"] == 0.5 and "standby_wait" in second.phases
    assert second.vm.artifacts == tmp_path / "next"
    vms.agent_started(0)  # the first VM goes now
    vms.give_back(0, second.vm, tmp_path, torn_down=False)
    vms.drain(10)
    assert first.vm.done == ["teardown"] and second.vm.done[-1] == "teardown" and vms.still_there() == []


@pytest.mark.parametrize("spares, standby, more_work", [((), True, True), ((1,), False, True), ((1,), True, False)],
                         ids=["no spare", "turned off", "no more work"])
def test_no_standby_without_a_spare_when_turned_off_or_without_more_work(tmp_path, supply, warm, spares, standby,
                                                                        more_work):
    vms = supply(tuple(warm(s) for s in spares), standby=standby, more_work=more_work)
    first = vms.claim(0, tmp_path)
    vms.agent_started(0)
    vms.give_back(0, first.vm, tmp_path, torn_down=False)
    phases = []
    second = vms.claim(0, tmp_path, phase=phases.append)
    assert phases == ["restore"] and second.vm.done == [] and second.phases == {}
    vms.drain(10)
    assert first.vm.done == ["teardown"]


def test_a_slots_last_vm_is_torn_down_when_the_slot_ends(tmp_path, supply, warm):
    vms = supply((warm(1),))
    first = vms.claim(0, tmp_path)
    vms.agent_started(0)
    vms.give_back(0, first.vm, tmp_path, torn_down=False)  # kept for the next agent's start
    assert any("cu-warm-0" in left for left in vms.still_there())
    vms.slot_ended(0)  # no next episode: it and the unused standby go
    vms.drain(10)
    assert first.vm.done == ["teardown"] and vms.still_there() == []


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
