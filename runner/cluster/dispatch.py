"""The driver's queue: a cluster run's episodes handed to the hosts' slots, one per slot.

The driver keeps the queue, the results and the run folders (one per run the pool serves: a
run's, or each arm of a study); hosts only run what they are given. A host that is lost
mid-episode (its node killed, its actor dead, its machine gone) takes nothing with it: the
episode it held goes back on the queue as an infra attempt and another host runs it, so
every planned episode is recorded exactly once. When no host is left, the slots stop and the
run names what has no result.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from runner.cluster.host_service import unpack_episode
from runner.config import private_dir
from runner.runs.pool import Episode
from runner.runs.pool_config import INFRA_RETRIES
from runner.records.results import EpisodeRecord, ResultLog, keep_record
from runner.tasks.model import Task
from runner.workers import Workers

log = logging.getLogger(__name__)


class HostLost(Exception):
    """The host is gone; what it was running never finished."""


class RemoteHost(Protocol):
    name: str
    slots: int

    def run_episode(self, run: int, task_id: str, trial: int, slot: int, stop: threading.Event) -> tuple[dict, bytes]:
        """The episode of the pool's run RUN: its record and its artifacts' tar. HostLost when the
        host goes; any other exception is the host's code failing on this episode."""


@dataclass(frozen=True)
class RunOutput:
    """Where one of the pool's runs keeps what its episodes come to."""

    out_dir: Path
    log: ResultLog
    on_record: Callable[[EpisodeRecord], None] = lambda _r: None


@dataclass
class Work:
    run: int
    task: Task
    trial: int
    lost: list[str] = field(default_factory=list)  # hosts that were lost while running it


@dataclass
class SlotView:
    task_id: str = ""
    trial: int = 0
    since: float = field(default_factory=time.monotonic)


class ClusterPool:
    def __init__(self, hosts: list[RemoteHost], outputs: list[RunOutput],
                 on_notice: Callable[[str], None] = lambda _m: None, retries: int = INFRA_RETRIES) -> None:
        self.hosts = hosts
        self.outputs = outputs
        self.on_notice = on_notice
        self.retries = retries
        self.status = {(h.name, s): SlotView() for h in hosts for s in range(h.slots)}
        self.lost_hosts: dict[str, str] = {}
        self._queue: queue.Queue[Work] = queue.Queue()
        self._outstanding = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def alive(self) -> list[RemoteHost]:
        return [h for h in self.hosts if h.name not in self.lost_hosts]

    def run(self, work: list[Episode], render: Callable[[], None] = lambda: None) -> None:
        """Runs WORK, (run, task, trial) episodes, over every host's slots (runner.workers: on
        Ctrl-C the slots stop, each host is told through the stop event, and the interrupt is
        re-raised)."""
        for run, task, trial in work:
            self._queue.put(Work(run, task, trial))
        self._outstanding = len(work)

        def do(slot: tuple[RemoteHost, int], item: Work) -> None:
            host, index = slot
            self.status[(host.name, index)] = SlotView(item.task.id, item.trial)
            try:
                self._dispatch(host, index, item)
            finally:
                self.status[(host.name, index)] = SlotView()

        Workers(self._take, do, still_there=self._in_flight, name=lambda slot: f"{slot[0].name}-{slot[1]}",
                stopping=self._stop).run([(host, slot) for host in self.hosts for slot in range(host.slots)], render)

    def stop(self) -> None:
        self._stop.set()

    def _take(self, slot: tuple[RemoteHost, int]) -> Work | None:
        """The next episode for a slot of HOST, waiting while others are in flight (a lost host's
        come back on the queue); None once all are recorded, no host is left, or HOST is lost."""
        host = slot[0]
        while not self._stop.is_set() and host.name not in self.lost_hosts:
            try:
                return self._queue.get(timeout=0.5)
            except queue.Empty:
                with self._lock:
                    if self._outstanding == 0 or not self.alive:
                        return None
        return None

    def _in_flight(self) -> list[str]:
        """The episodes the hosts are still running: what a stopped run waits for."""
        return [f"{view.task_id} trial {view.trial} on {host}" for (host, _slot), view in list(self.status.items())
                if view.task_id]

    def _dispatch(self, host: RemoteHost, slot: int, item: Work) -> None:
        t0 = time.monotonic()
        started = datetime.now(UTC)
        try:
            data, artifacts = host.run_episode(item.run, item.task.id, item.trial, slot, self._stop)
        except HostLost as exc:
            self._host_lost(host, item, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - the host's code failed: an infra error, recorded
            if self._stop.is_set():
                return
            record = EpisodeRecord(item.task.id, item.trial, "infra_error", f"host {host.name} failed: {exc}",
                                   round(time.monotonic() - t0, 2), slot, len(item.lost) + 1, started.isoformat(),
                                   datetime.now(UTC).isoformat(), host=host.name)
            self._keep(item, record)
            return
        record = EpisodeRecord(**data)
        # The time the cluster added: dispatch, the call's round trip and the artifacts' way back.
        record.phases["dispatch"] = round(max(0.0, time.monotonic() - t0 - record.duration_s), 3)
        record.attempts += len(item.lost)
        unpack_episode(artifacts, self.outputs[item.run].out_dir / item.task.id)
        self._keep(item, record)

    def _host_lost(self, host: RemoteHost, item: Work, reason: str) -> None:
        with self._lock:
            first = host.name not in self.lost_hosts
            self.lost_hosts.setdefault(host.name, reason)
        if first:
            self.on_notice(f"host {host.name} was lost: {reason}; its episodes go to the other hosts")
        item.lost.append(host.name)
        self._note_lost_attempt(item, host.name, reason)
        if len(item.lost) > self.retries:
            self._keep(item, EpisodeRecord(item.task.id, item.trial, "infra_error",
                                     f"its host was lost {len(item.lost)} times ({', '.join(item.lost)})", 0.0, -1,
                                     len(item.lost), datetime.now(UTC).isoformat(), datetime.now(UTC).isoformat(),
                                     host=host.name))
            return
        self._queue.put(item)

    def _note_lost_attempt(self, item: Work, host: str, reason: str) -> None:
        folder = private_dir(self.outputs[item.run].out_dir / item.task.id) / f"{item.trial}.lost-on-{host}-{len(item.lost)}"
        folder.mkdir(exist_ok=True)
        (folder / "infra_error.txt").write_text(f"host {host} was lost mid-episode: {reason}\n")

    def _keep(self, item: Work, record: EpisodeRecord) -> None:
        with self._lock:
            self._outstanding -= 1
        output = self.outputs[item.run]
        keep_record(output.log, record, output.on_record)
