"""The VM supply as the front ends besides a run use it (runner.runs.vm_supply), through its
interface with an injected factory (tests/fakes/episode_vms.py): a sample takes a free slot, a
warm one first; a front end that starts its VM itself gets the cold fallback it asks for; a
supply of one slot (`vm up`, `mcp`, `check`) leaves nothing behind; a run's pool's supply takes
its options from the pool's configuration."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from fakes.episode_vms import FakeVmFactory, fake_warm
from runner.errors import InfraError
from runner.runs.pool_config import PoolConfig
from runner.runs.vm_supply import SupplyOptions, VmSupply, pool_supply


@pytest.fixture
def warm(tmp_path):
    return lambda slot: fake_warm(tmp_path, slot)


def test_a_free_slot_is_taken_a_warm_one_first_and_none_twice_until_given_back(tmp_path, warm):
    vms = VmSupply(FakeVmFactory(), SupplyOptions(slots=3, warm={1: warm(1)}, standby=False))
    first, second, third = (vms.claim_free(tmp_path) for _ in range(3))
    assert [c.slot for c in (first, second, third)] == [1, 0, 2]  # warm first, then the lowest
    assert first.vm.warm.state.slot == 1 and second.vm.warm is None
    with pytest.raises(RuntimeError, match="all 3 slots are claimed"):
        vms.claim_free(tmp_path)
    vms.give_back(1, first.vm, tmp_path, torn_down=False)  # torn down in the background, as a run's
    vms.drain(10)
    again = vms.claim_free(tmp_path)
    assert again.slot == 1 and first.vm.done == ["teardown"]


def test_a_claim_that_fails_leaves_its_slot_free(tmp_path):
    class FailsOnce(FakeVmFactory):
        def __call__(self, slot, **given):
            if not self.made:
                self.made.append(None)
                raise OSError("no room for the overlay")
            return super().__call__(slot, **given)

    vms = VmSupply(FailsOnce(), SupplyOptions(slots=1, warm={}, standby=False))
    with pytest.raises(OSError):
        vms.claim_free(tmp_path)
    assert vms.claim_free(tmp_path).slot == 0 and vms.still_there() == ["VM cu-t-0"]


def test_a_failed_warm_start_is_tried_once_more_cold_when_the_supply_says_so(tmp_path, warm):
    make_vm = FakeVmFactory(fail_warm_start=InfraError("restore failed"))
    vms = VmSupply(make_vm, SupplyOptions(slots=1, warm={0: warm(0)}, standby=False, cold_after_failed_restore=True))
    said: list[str] = []
    claim = vms.claim_free(tmp_path / "ep")
    vm = vms.started(claim, said.append)
    warm_vm, cold_vm = make_vm.made
    assert vm is cold_vm is claim.vm and vms.active(0) is cold_vm
    assert warm_vm.done == ["start", "teardown"] and cold_vm.done == ["start"] and cold_vm.warm is None
    assert cold_vm.artifacts == tmp_path / "ep"
    assert said == ["slot 0: the warm restore failed (restore failed); booting cold"]
    assert warm(0).lock().try_acquire()  # the failed restore let its warm state go


def test_without_the_option_a_failed_warm_start_is_the_callers_error(tmp_path, warm):
    make_vm = FakeVmFactory(fail_warm_start=InfraError("restore failed"))
    vms = VmSupply(make_vm, SupplyOptions(slots=1, warm={0: warm(0)}, standby=False))
    claim = vms.claim(0, tmp_path)
    with pytest.raises(InfraError, match="restore failed"):
        vms.started(claim)
    vms.give_back(0, claim.vm, tmp_path, torn_down=True)
    assert len(make_vm.made) == 1 and vms.still_there() == []


def test_a_supply_of_one_slot_leaves_nothing_behind(tmp_path, warm):
    vms = VmSupply(FakeVmFactory(), SupplyOptions(slots=1, warm={0: warm(0)}, standby=False))
    claim = vms.claim(0, None)
    vm = vms.started(claim)
    assert vm.started and vms.still_there() == ["VM cu-warm-0"]
    vm.teardown()
    vms.give_back(0, vm, None, torn_down=True)
    assert vms.still_there() == [] and vms.active(0) is None


def test_stop_kills_every_vm_in_flight(tmp_path, warm):
    vms = VmSupply(FakeVmFactory(), SupplyOptions(slots=2, warm={}, standby=False))
    claims = [vms.claim(slot, tmp_path) for slot in (0, 1)]
    vms.stop()
    assert [c.vm.done for c in claims] == [["kill"], ["kill"]]


def test_a_runs_pool_supply_takes_its_options_from_the_pool_and_makes_its_vms(tmp_path, warm):
    image = SimpleNamespace(name="img", folder=tmp_path)
    pool = PoolConfig(image=image, accel="kvm", vm_pool=2, run_id="r", warm={0: warm(0), 1: warm(1)},  # type: ignore[arg-type]
                      spare_warm=(warm(2),), standby=False)
    vms = pool_supply(None, SimpleNamespace(episodes_dir=tmp_path), pool, threading.Event(), lambda: True)  # type: ignore[arg-type]
    assert vms.options == SupplyOptions(slots=2, warm=pool.warm, spare_warm=pool.spare_warm, standby=False)
    made = vms.claim(1, tmp_path).vm  # an EpisodeVM of the pool's run, restoring slot 1's own state
    assert (made.run_id, made.slot, made.options.accel, made.warm) == ("r", 1, "kvm", pool.warm[1])
    assert made.name.startswith("cu-warm-img-") and made.name.endswith("-1")
