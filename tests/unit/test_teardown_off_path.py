"""Teardown off the slot's critical path, through the VM supply's interface
(runner.runs.vm_supply): a slot restores a spare warm state while its last VM is still being
destroyed, a run waits for every background teardown before it returns, and a teardown that
fails is noted in its episode folder."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from runner.agents.builtin import NopAgent
from runner.runs import vm_supply
from runner.runs.pool_config import PoolConfig
from runner.runs.scheduler import SlotScheduler
from runner.runs.vm_supply import VmSupply


def warm(slot: int):
    return SimpleNamespace(state=SimpleNamespace(slot=slot))


def config(tmp_path, own: dict, spares: tuple) -> PoolConfig:
    image = SimpleNamespace(name="img", path=lambda *_: tmp_path)
    return PoolConfig(image=image, accel="tcg", vm_pool=max(1, len(own)), run_id="t", warm=own, spare_warm=spares)


class FakeEpisodeVm:
    """Stands in for the (unstarted) EpisodeVM the supply constructs: what it was given."""

    def __init__(self, *_args, warm, warm_lock, artifacts=None, **_kwargs):
        self.name, self.warm, self.warm_lock, self.artifacts = f"cu-warm-{warm.state.slot}", warm, warm_lock, artifacts


@pytest.fixture
def fake_vms(tmp_path, monkeypatch):
    monkeypatch.setattr("runner.vm.warm_state.warm_root", lambda image: tmp_path / "warm")
    monkeypatch.setattr(vm_supply, "EpisodeVM", FakeEpisodeVm)


def test_a_slot_takes_a_spare_while_its_own_state_is_still_held(tmp_path, fake_vms):
    vms = VmSupply(None, None, config(tmp_path, {0: warm(0)}, (warm(1), warm(2))), threading.Event(), lambda: False)
    first = vms.claim(0, tmp_path).vm
    assert first.warm.state.slot == 0 and first.warm_lock is not None  # its own, when free
    second = vms.claim(0, tmp_path).vm  # the first still holds slot 0 (being torn down)
    assert second.warm.state.slot == 1 and second.warm_lock is not None
    third = vms.claim(0, tmp_path).vm
    assert third.warm.state.slot == 2
    fourth = vms.claim(0, tmp_path).vm  # all held: its own, to wait for in its start
    assert fourth.warm.state.slot == 0 and fourth.warm_lock is None
    first.warm_lock.release()
    again = vms.claim(0, tmp_path).vm
    assert again.warm.state.slot == 0 and again.warm_lock is not None
    for vm in (second, third, again):
        vm.warm_lock.release()


def test_without_spares_a_slot_waits_for_its_own_state_as_before(tmp_path, fake_vms):
    vms = VmSupply(None, None, config(tmp_path, {0: warm(0)}, ()), threading.Event(), lambda: False)
    chosen = vms.claim(0, tmp_path).vm
    assert chosen.warm.state.slot == 0 and chosen.warm_lock is None  # EpisodeVM takes (and waits for) the lock


def test_a_run_returns_only_once_every_background_teardown_is_done(tmp_path):
    h = SlotScheduler(host=None, settings=None, pool=config(tmp_path, {}, ()), agent=NopAgent(), out_dir=tmp_path)
    torn_down, release = threading.Event(), threading.Event()

    class SlowVm:
        name = "cu-t-0"

        def teardown(self):
            release.wait(5)
            torn_down.set()
            return []

    h.vms.give_back(0, SlowVm(), tmp_path, torn_down=False)  # an episode's VM, torn down in the background
    assert not torn_down.is_set() and h.still_there() == ["VM cu-t-0 (being torn down)"]
    threading.Timer(0.3, release.set).start()
    h.run([])
    assert torn_down.is_set()


def test_a_teardown_that_fails_is_noted_in_its_episode_folder(tmp_path):
    vms = VmSupply(None, None, config(tmp_path, {}, ()), threading.Event(), lambda: False)

    class BrokenVm:
        name = "cu-t-0"

        def teardown(self):
            return ["destroy domain: libvirt said no"]

    vms.give_back(0, BrokenVm(), tmp_path, torn_down=False)
    vms.drain()
    assert (tmp_path / "teardown-error.txt").read_text() == "destroy domain: libvirt said no\n"
