"""The Pool seam: where a run's episodes run. A run drives a pool through this one interface; a
local pool runs them on this machine's slots, a cluster pool on a cluster's hosts
(runner.cluster.driver). The run never imports the cluster: the command that starts a run
chooses the pool's opener (runner.cli). The local pool is runner.runs.local_pool.

An opener is a context manager: it opens what the pool needs (the run scope and a slot
scheduler here; a Ray connection, the hosts' images and runs there), yields the pool, and closes
it all however the block ends.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from runner.config import Settings
from runner.live.board import LiveSource
from runner.runs.results import EpisodeRecord
from runner.runs.run_plan import RunPlan
from runner.runs.request import RunRequest
from runner.tasks.model import Task


@dataclass(frozen=True)
class SlotState:
    """One slot of a pool as the run shows it while it works."""

    host: str  # "" for this machine
    slot: int
    task_id: str  # "" when idle
    trial: int
    phase: str
    since: float  # time.monotonic() when the phase began


@dataclass(frozen=True)
class PoolHooks:
    """What a pool tells the run: each record as it is kept, and what a person should hear."""

    on_record: Callable[[EpisodeRecord], None] = lambda _r: None
    notice: Callable[[str], None] = lambda _line: None


class Pool(Protocol):
    def where(self) -> dict[str, Any]:
        """What run.json records of where the run ran: the host's facts, or the cluster's hosts'."""

    def describe(self) -> str:
        """One line for the run's start: how many slots, where, how VMs start."""

    def run(self, work: list[tuple[Task, int]], render: Callable[[], None] = lambda: None) -> None:
        """Runs every (task, trial) of WORK, each record kept in the run's results as it ends (and
        given to PoolHooks.on_record); calls RENDER while it works. On KeyboardInterrupt it stops,
        leaves nothing running and re-raises."""

    def status(self) -> list[SlotState]:
        """Each slot, now."""

    def lost(self) -> str | None:
        """Why episodes could not run (every cluster host lost), or None."""

    def live_source(self, title: str, total: int, done_before: int) -> LiveSource | None:
        """What the live view shows of this pool, or None when it cannot (a cluster's VMs)."""


PoolOpener = Callable[[Settings, RunPlan, RunRequest, PoolHooks], AbstractContextManager[Pool]]
