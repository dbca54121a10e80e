"""The Pool seam: where a run's episodes run. A run, or a study's arms, drive a pool through this
one interface; a local pool runs them on this machine's slots, a cluster pool on a cluster's
hosts (runner.cluster.driver). The run never imports the cluster: the command that starts a run
chooses the pool's opener (runner.api.pool_opener). The local pool is runner.runs.local_pool.

A pool serves one or more runs (PoolRun): a run's own, or each arm of a study, interleaved on
the same slots. An episode of work names which (Episode: its run's index, task, trial).

An opener is a context manager: it opens what the pool needs (the run scope and a slot
scheduler per run here; a Ray connection, the hosts' images and runs there), yields the pool,
and closes it all however the block ends.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from runner.config import Settings
from runner.errors import UsageError
from runner.live.board import LiveSource
from runner.records.results import EpisodeRecord

if TYPE_CHECKING:  # the plan's types, for type checking alone: the contract imports no planner
    from runner.images.catalog import Image
    from runner.runs.request import RunRequest
    from runner.runs.run_plan import RunPlan
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
class PoolRun:
    """One run a pool serves: its plan and request, and who hears of each record it keeps."""

    plan: RunPlan
    request: RunRequest
    on_record: Callable[[EpisodeRecord], None] = lambda _r: None


Episode = tuple[int, "Task", int]  # (the index of its run in the pool's runs, task, trial)
Notice = Callable[[str], None]  # what a person should hear while the pool opens and runs


class Pool(Protocol):
    def where(self, run: int = 0) -> dict[str, Any]:
        """What run.json of the pool's run RUN records of where it ran: the host's facts, or the
        cluster's hosts'."""

    def describe(self) -> str:
        """One line for the run's start: how many slots, where, how VMs start."""

    def run(self, work: list[Episode], render: Callable[[], None] = lambda: None) -> None:
        """Runs every episode of WORK in its order, each record kept in its run's results as it
        ends (and given to that run's on_record); calls RENDER while it works. On
        KeyboardInterrupt it stops, leaves nothing running and re-raises."""

    def status(self) -> list[SlotState]:
        """Each slot, now."""

    def lost(self) -> str | None:
        """Why episodes could not run (every cluster host lost), or None."""

    def live_source(self, title: str, total: int, done_before: int) -> LiveSource | None:
        """What the live view shows of this pool, or None when it cannot (a cluster's VMs)."""


PoolOpener = Callable[[Settings, tuple[PoolRun, ...], Notice], AbstractContextManager[Pool]]


def shared_image(runs: tuple[PoolRun, ...]) -> Image:
    """The one image RUNS run on (a study's arms share it), or a UsageError naming the others."""
    image = runs[0].plan.image
    if other := [r.plan.image.name for r in runs if r.plan.image.name != image.name]:
        raise UsageError(f"the runs of one pool share an image: {image.name}, and {', '.join(other)}",
                         fix="give a study's arms the same image")
    return image
