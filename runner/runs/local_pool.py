"""The local pool: a run's episodes on this machine's slots, a slot scheduler in the run scope."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from typing_extensions import override

from runner.config import Settings
from runner.live.board import LiveSource
from runner.runs.pool import Pool, PoolHooks, SlotState
from runner.runs.provenance import host_facts
from runner.runs.request import RunRequest
from runner.runs.results import EpisodeRecord
from runner.runs.run_plan import RunPlan
from runner.runs.scheduler import SlotScheduler
from runner.runs.scope import RunScope, ScopeRequest, open_scope
from runner.tasks.model import Task


class LocalPool(Pool):
    """This machine's slots: a slot scheduler in a run scope."""

    def __init__(self, scope: RunScope, scheduler: SlotScheduler, request: RunRequest) -> None:
        self.scope = scope
        self.scheduler = scheduler
        self.request = request

    @override
    def where(self) -> dict:
        where = {"host": host_facts(), **self.scope.provenance(self.request.accel, self.request.start)}
        where["pool"] = {"asked": self.request.vm_pool, **where["pool"]}
        return where

    @override
    def describe(self) -> str:
        return f"pool {self.scope.vm_pool}, {self.scope.accel.upper()}, {self.scope.start.mode} start"

    @override
    def run(self, work: list[tuple[Task, int]], render: Callable[[], None] = lambda: None) -> None:
        self.scheduler.run(work, render)

    @override
    def status(self) -> list[SlotState]:
        return [SlotState("", slot, s.task_id, s.trial, s.phase, s.since)
                for slot, s in sorted(self.scheduler.status.items())]

    @override
    def lost(self) -> str | None:
        return None

    @override
    def live_source(self, title: str, total: int, done_before: int) -> LiveSource | None:
        from runner.runs.live_sources import SchedulerSource

        source = SchedulerSource(self.scheduler, title, total, done_before=done_before)
        shown = self.scheduler.on_record

        def on_record(record: EpisodeRecord) -> None:
            source.record(record)
            shown(record)

        self.scheduler.on_record = on_record
        return source


@contextmanager
def open_local_pool(settings: Settings, plan: RunPlan, request: RunRequest, hooks: PoolHooks) -> Iterator[Pool]:
    """The pool of this machine: the run scope for PLAN's image, and a slot scheduler in it."""
    scope_request = ScopeRequest(plan.image.name, accel=request.accel, start=request.start, vm_pool=request.vm_pool)
    with open_scope(settings, scope_request, notice=hooks.notice) as scope:
        scheduler = SlotScheduler(scope.host, settings, scope.pool_for(request, plan.agent, plan.suite.safety,
                                                                          plan.host_scoring),
                                  plan.agent, plan.out_dir, on_record=hooks.on_record)
        yield LocalPool(scope, scheduler, request)
