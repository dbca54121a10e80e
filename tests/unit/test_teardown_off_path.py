"""Teardown off the slot's critical path: a slot restores a spare warm state while its last
VM is still being destroyed, a run waits for every background teardown before it returns,
and a teardown that fails is noted in its episode folder."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from runner.agents.builtin import NopAgent
from runner.runs.pool_config import PoolConfig
from runner.runs.scheduler import SlotScheduler


def warm(slot: int):
    return SimpleNamespace(state=SimpleNamespace(slot=slot))


def harness(tmp_path, own: dict, spares: tuple) -> SlotScheduler:
    image = SimpleNamespace(name="img", path=lambda *_: tmp_path)
    config = PoolConfig(image=image, accel="tcg", vm_pool=len(own), run_id="t", warm=own, spare_warm=spares)
    return SlotScheduler(host=None, settings=None, pool=config, agent=NopAgent(), out_dir=tmp_path)


def test_a_slot_takes_a_spare_while_its_own_state_is_still_held(tmp_path, monkeypatch):
    monkeypatch.setattr("runner.images.warm_state.warm_root", lambda image: tmp_path / "warm")
    h = harness(tmp_path, {0: warm(0)}, (warm(1), warm(2)))
    first, first_lock = h._claim_warm(0)
    assert first.state.slot == 0 and first_lock is not None  # its own, when free
    second, second_lock = h._claim_warm(0)  # the first still holds slot 0 (being torn down)
    assert second.state.slot == 1 and second_lock is not None
    third, third_lock = h._claim_warm(0)
    assert third.state.slot == 2
    fourth, fourth_lock = h._claim_warm(0)  # all held: its own, to wait for as before
    assert fourth.state.slot == 0 and fourth_lock is None
    first_lock.release()
    again, again_lock = h._claim_warm(0)
    assert again.state.slot == 0 and again_lock is not None
    for lock in (second_lock, third_lock, again_lock):
        lock.release()


def test_without_spares_a_slot_waits_for_its_own_state_as_before(tmp_path):
    h = harness(tmp_path, {0: warm(0)}, ())
    chosen, lock = h._claim_warm(0)
    assert chosen.state.slot == 0 and lock is None  # EpisodeVM takes (and waits for) the lock itself


def test_a_run_returns_only_once_every_background_teardown_is_done(tmp_path):
    h = harness(tmp_path, {}, ())
    torn_down = threading.Event()
    release = threading.Event()

    class SlowVm:
        name = "cu-t-0"

        def teardown(self):
            release.wait(5)
            torn_down.set()
            return []

    h._teardown_later(SlowVm(), tmp_path)
    assert not torn_down.is_set()
    threading.Timer(0.3, release.set).start()
    h.run([])
    assert torn_down.is_set()


def test_a_teardown_that_fails_is_noted_in_its_episode_folder(tmp_path):
    h = harness(tmp_path, {}, ())

    class BrokenVm:
        name = "cu-t-0"

        def teardown(self):
            return ["destroy domain: libvirt said no"]

    h._teardown_later(BrokenVm(), tmp_path)
    h.drain()
    assert (tmp_path / "teardown-error.txt").read_text() == "destroy domain: libvirt said no\n"
