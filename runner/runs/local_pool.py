"""The local pool: runs' episodes on this machine's slots, in one run scope.

Each run the pool serves (a run's own, or each arm of a study) has its own slot scheduler (its
agent, its results); all of them share the slots, one VM supply (warm states, standbys,
background teardowns) and one stop, so a study's arms interleave on the pool as one run's
episodes do (runner.runs.scheduler.run_on_slots).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from typing_extensions import override

from runner.config import Settings
from runner.vm.episode import EpisodeVM
from runner.live.board import LiveSource
from runner.runs.pool import Episode, Notice, Pool, PoolRun, SlotState, shared_image
from runner.records.provenance import host_facts
from runner.records.results import EpisodeRecord
from runner.runs.scheduler import SlotScheduler, SlotStatus, run_on_slots
from runner.runs.scope import RunScope, ScopeRequest, open_scope
from runner.runs.vm_supply import pool_supply


class LocalPool(Pool):
    """This machine's slots: a slot scheduler per run, in a run scope."""

    def __init__(self, scope: RunScope, settings: Settings, runs: tuple[PoolRun, ...]) -> None:
        self.scope = scope
        self.runs = runs
        self.stopping = threading.Event()
        self._work: queue.SimpleQueue[Episode] = queue.SimpleQueue()
        first = runs[0]
        # What the supply reads (the image, its warm states, standbys) is the same for every run.
        supply_config = scope.pool_for(first.request.agent, first.request.how, first.plan.agent, first.plan.suite.safety,
                                       first.plan.host_scoring, net=first.plan.net)
        self.vms = pool_supply(scope.host, settings, supply_config, self.stopping, more_work=lambda: not self._work.empty())
        self.schedulers = [
            SlotScheduler(scope.host, settings,
                          scope.pool_for(r.request.agent, r.request.how, r.plan.agent, r.plan.suite.safety,
                                         r.plan.host_scoring, net=r.plan.net),
                          r.plan.agent, r.plan.out_dir, on_record=r.on_record, vms=self.vms, stopping=self.stopping)
            for r in runs]

    @override
    def where(self, run: int = 0) -> dict[str, Any]:
        how = self.runs[run].request.how
        where = {"host": host_facts(), **self.scope.provenance(how.accel, how.start)}
        where["pool"] = {"asked": how.vm_pool, **where["pool"]}
        return where

    @override
    def describe(self) -> str:
        return f"pool {self.scope.vm_pool}, {self.scope.accel.upper()}, {self.scope.start.mode} start"

    @override
    def run(self, work: list[Episode], render: Callable[[], None] = lambda: None) -> None:
        for item in work:
            self._work.put(item)
        run_on_slots(self.schedulers, self.vms, self.stopping, self._work, min(self.scope.vm_pool, len(work)), render)

    def _running(self, slot: int) -> SlotScheduler | None:
        """The scheduler whose episode SLOT runs now, or None between episodes."""
        return next((s for s in self.schedulers if s.status.get(slot, SlotStatus()).task_id), None)

    @override
    def status(self) -> list[SlotState]:
        return [SlotState("", slot, s.task_id, s.trial, s.phase, s.since) for slot, s in self.statuses().items()]

    @override
    def lost(self) -> str | None:
        return None

    # -- the live view's side (runner.runs.live_sources.SlotsView)

    def statuses(self) -> dict[int, SlotStatus]:
        """What each slot does now, whichever run's episode it is."""
        return {slot: s.status[slot] if (s := self._running(slot)) else SlotStatus() for slot in range(self.scope.vm_pool)}

    def active_vm(self, slot: int) -> EpisodeVM | None:
        return self.vms.active(slot)

    def intervene(self, slot: int, entry: dict[str, Any]) -> None:
        if (scheduler := self._running(slot)) is not None:
            scheduler.intervene(slot, entry)

    @override
    def live_source(self, title: str, total: int, done_before: int) -> LiveSource | None:
        from runner.runs.live_sources import SchedulerSource

        source = SchedulerSource(self, title, total, done_before=done_before)
        for scheduler in self.schedulers:
            shown = scheduler.on_record

            def on_record(record: EpisodeRecord, shown: Callable[[EpisodeRecord], None] = shown) -> None:
                source.record(record)
                shown(record)

            scheduler.on_record = on_record
        return source


@contextmanager
def open_local_pool(settings: Settings, runs: tuple[PoolRun, ...], notice: Notice) -> Iterator[LocalPool]:
    """The pool of this machine for RUNS, which share one image: the run scope, and a slot
    scheduler per run in it."""
    how = runs[0].request.how
    scope_request = ScopeRequest(shared_image(runs).name, accel=how.accel, start=how.start, vm_pool=how.vm_pool)
    with open_scope(settings, scope_request, notice=notice) as scope:
        yield LocalPool(scope, settings, runs)
