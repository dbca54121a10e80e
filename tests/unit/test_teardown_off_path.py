"""Teardown off the slot's critical path, through the VM supply's interface
(runner.runs.vm_supply): a slot restores a spare warm state while its last VM is still being
destroyed, a run waits for every background teardown before it returns, and a teardown that
fails is noted in its episode folder."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from fakes.episode_vms import FakeVmFactory, fake_warm
from runner.agents.builtin import NopAgent
from runner.runs.pool_config import PoolConfig
from runner.runs.scheduler import SlotScheduler
from runner.runs.vm_supply import SupplyOptions, VmSupply


@pytest.fixture
def warm(tmp_path):
    return lambda slot: fake_warm(tmp_path, slot)


def config(tmp_path) -> PoolConfig:
    image = SimpleNamespace(name="img", path=lambda *_: tmp_path)
    return PoolConfig(image=image, accel="tcg", vm_pool=1, run_id="t")


def supply(own: dict, spares: tuple = ()) -> VmSupply:
    """A supply whose VMs are made by a fake factory (unstarted: what each was given)."""
    return VmSupply(FakeVmFactory(), SupplyOptions(slots=max(1, len(own)), warm=own, spare_warm=spares),
                    threading.Event(), lambda: False)


def test_a_slot_takes_a_spare_while_its_own_state_is_still_held(tmp_path, warm):
    vms = supply({0: warm(0)}, (warm(1), warm(2)))
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


def test_without_spares_a_slot_waits_for_its_own_state_as_before(tmp_path, warm):
    vms = supply({0: warm(0)})
    chosen = vms.claim(0, tmp_path).vm
    assert chosen.warm.state.slot == 0 and chosen.warm_lock is None  # EpisodeVM takes (and waits for) the lock


def test_a_run_returns_only_once_every_background_teardown_is_done(tmp_path):
    h = SlotScheduler(host=None, settings=None, pool=config(tmp_path), agent=NopAgent(), out_dir=tmp_path)
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
    vms = supply({})

    class BrokenVm:
        name = "cu-t-0"

        def teardown(self):
            return ["destroy domain: libvirt said no"]

    vms.give_back(0, BrokenVm(), tmp_path, torn_down=False)
    vms.drain()
    assert (tmp_path / "teardown-error.txt").read_text() == "destroy domain: libvirt said no\n"
