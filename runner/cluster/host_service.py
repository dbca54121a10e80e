"""A cu-run host: what one lab machine does for a cluster run, as a long-lived Ray actor.

It owns the machine's libvirt, catalog, warm slots and episode VMs, through the same Host
seam and slot scheduler as a run on one machine; only the queue stays with the driver. Each driver
run is begun once (suite, agent, image, start mode), then episodes are asked for one at a
time, one per slot, and come back as a record and a tar of the episode's artifacts.

A driver holds its run by a lease it renews every few seconds. A driver that is killed stops
renewing it, and the host then destroys that run's VMs. A host that starts (or restarts after
its machine came back) first collects its own orphans, as `cu-run gc` would.
"""

from __future__ import annotations

import io
import logging
import os
import queue
import shutil
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from runner import __version__
from runner.cluster.image_transfer import ImageReceiver
from runner.choices import AccelChoice
from runner.config import Settings, private_dir
from runner.errors import InfraError, UsageError
from runner.vm.gc import collect_garbage
from runner.hypervisor.connect import connect_host
from runner.images.catalog import Catalog
from runner.vm.warm_state import list_slots
from runner.records.provenance import host_facts
from runner.runs.episode_inputs import episode_tasks, net_settings, request_agent
from runner.runs.request import RunRequest
from runner.runs.run_plan import RunPlan
from runner.runs.scheduler import SlotScheduler
from runner.runs.scope import ScopeRequest, make_scope
from runner.runs.scope import resolve_accel, warm_outside_a_run
from runner.tasks.model import Suite, load_suite

log = logging.getLogger(__name__)

LEASE_S = 30.0  # a run whose driver has not renewed its lease for this long is ended
LEASE_CHECK_S = 2.0


@dataclass(frozen=True)
class RunOrder:
    """What a driver asks a host to get ready for: the run's own request, whole (so every option
    that changes an episode reaches the host as it would a local run), and the suite and image
    it is for, by content."""

    run_key: str
    suite_name: str
    suite_sha256: str
    suite_tar: bytes
    image: str
    image_sha256: str
    request: RunRequest

    @classmethod
    def of(cls, request: RunRequest, plan: RunPlan, run_key: str) -> RunOrder:
        return cls(run_key=run_key, suite_name=plan.suite.folder.name, suite_sha256=plan.suite.content_hash(),
                   suite_tar=pack_suite(plan.suite), image=plan.image.name,
                   image_sha256=plan.image.manifest.disk_sha256, request=request)


@dataclass
class HostRun:
    scheduler: SlotScheduler
    tasks: dict
    folder: Path


class Leases:
    """When each run's driver last spoke; which runs it has abandoned."""

    def __init__(self, lease_s: float = LEASE_S, clock=time.monotonic) -> None:
        self.lease_s = lease_s
        self.clock = clock
        self._renewed: dict[str, float] = {}

    def renew(self, key: str) -> None:
        self._renewed[key] = self.clock()

    def drop(self, key: str) -> None:
        self._renewed.pop(key, None)

    def expired(self) -> list[str]:
        now = self.clock()
        return [k for k, t in list(self._renewed.items()) if now - t > self.lease_s]


class SlotPool:
    """The machine's slots, shared by every driver's run: two runs on one host never hold the
    same slot (its warm state, its domain name) at once; another waits for one to be free."""

    def __init__(self, slots: int) -> None:
        self._free: queue.Queue[int] = queue.Queue()
        for slot in range(slots):
            self._free.put(slot)

    def take(self, still_wanted: Callable[[], object], poll_s: float = 1.0) -> int:
        """A free slot, waiting as long as STILL_WANTED does not raise (a run that ends stops waiting)."""
        while True:
            still_wanted()
            try:
                return self._free.get(timeout=poll_s)
            except queue.Empty:
                continue

    def give(self, slot: int) -> None:
        self._free.put(slot)


class HostService:
    def __init__(self, name: str, cache_dir: str, slots: int, libvirt_uri: str | None = None) -> None:
        self.name = name
        self.slots = slots
        self.settings = Settings.resolve(Path(cache_dir), libvirt_uri)
        private_dir(self.settings.cache_dir)
        self.host = connect_host(self.settings.libvirt_uri)
        self.receiver = ImageReceiver(self.settings)
        self.leases = Leases()
        self._runs: dict[str, HostRun] = {}
        self._lock = threading.Lock()
        self.free_slots = SlotPool(slots)
        report = collect_garbage(self.host, self.settings)  # a host that comes back clears its own orphans
        self.collected = report.removed
        for line in report.removed:
            log.warning("host %s: removed %s", name, line)
        threading.Thread(target=self._watch_leases, name="leases", daemon=True).start()

    # -- what the host is

    def info(self) -> dict:
        accel, probe = resolve_accel(self.settings, AccelChoice.auto)
        images = Catalog(self.settings.images_dir).images()
        return {
            "name": self.name, "version": __version__, "slots": self.slots, "pid": os.getpid(),
            "cache_dir": str(self.settings.cache_dir), "accel": accel, "accel_reason": probe.reason,
            "facts": host_facts(), "versions": self.host.versions(),
            "images": [{"name": i.name, "sha256": i.manifest.disk_sha256, "profile": i.manifest.profile}
                       for i in images],
            "warm": {i.name: [s.state.slot for s in list_slots(i)] for i in images},
            "in_flight": self.in_flight(), "collected_at_start": self.collected,
        }

    def in_flight(self) -> list[dict]:
        now = time.monotonic()
        with self._lock:
            runs = list(self._runs.items())
        return [{"run": key, "slot": slot, "task": s.task_id, "trial": s.trial, "phase": s.phase,
                 "elapsed_s": round(now - s.since, 1)}
                for key, run in runs for slot, s in sorted(run.scheduler.status.items()) if s.task_id]

    # -- images

    def image_begin(self, name: str, files: dict[str, int]) -> None:
        self.receiver.begin(name, files)

    def image_write(self, name: str, rel: str, offset: int, data: bytes) -> None:
        self.receiver.write(name, rel, offset, data)

    def image_commit(self, name: str, sha256: str, modes: dict[str, int]) -> str:
        return str(self.receiver.commit(name, sha256, modes).folder)

    def image_abandon(self, name: str) -> None:
        self.receiver.abandon(name)

    def warm(self, image_name: str, accel: AccelChoice = AccelChoice.auto, force: bool = False) -> list[str]:
        """Makes a warm state for each of this host's slots (tied to its CPU and QEMU)."""
        image = Catalog(self.settings.images_dir).get(image_name)
        lines: list[str] = []
        warm_outside_a_run(self.settings, self.host, image, accel, self.slots, admitted=True, force=force,
                           progress=lines.append)
        return lines

    # -- runs

    def begin_run(self, order: RunOrder) -> dict:
        """Gets ready for ORDER's episodes: its suite unpacked, its image checked, the run's scope
        (accelerator, admission, warm states made at first use) and its agent made by the same
        functions as a local run's."""
        suite = load_suite(str(self._unpack_suite(order)))
        if suite.content_hash() != order.suite_sha256:
            raise InfraError(f"host {self.name}: suite {order.suite_name} arrived changed")
        image = Catalog(self.settings.images_dir).get(order.image)
        if image.manifest.disk_sha256 != order.image_sha256:
            raise UsageError(f"host {self.name} has another {order.image} than the driver's")
        request = order.request
        scope = make_scope(self.settings, ScopeRequest(order.image, accel=request.how.accel, start=request.how.start,
                                                       vm_pool=self.slots, warm_at_first_use=True), self.host)
        tasks = episode_tasks(request.work, suite.tasks)
        agent = request_agent(request.agent, tasks)
        folder = private_dir(self.settings.cache_dir / "cluster" / "runs" / order.run_key)
        pool = scope.pool_for(request.agent, request.how, agent, suite.safety,
                              net=net_settings(request.how, request.work.assets))
        scheduler = SlotScheduler(self.host, self.settings, pool, agent, folder)
        with self._lock:
            self._runs[order.run_key] = HostRun(scheduler, {t.id: t for t in tasks}, folder)
            self.leases.renew(order.run_key)
        # The scope's notes, but its memory's word in slots: a host has no --vm-pool.
        notes = [n for n in scope.notes if not scope.admission.capped or n != scope.admission.notice(image.name)]
        if scope.admission.capped:
            notes.insert(0, f"{scope.vm_pool} of its {self.slots} slots fit in its memory")
        return {"slots": scope.vm_pool, "accel": scope.accel, "accel_reason": scope.probe.reason,
                "start": scope.start.mode, "notes": notes,
                "facts": host_facts(), "versions": self.host.versions(), "agent_version": agent.version()}

    def _unpack_suite(self, order: RunOrder) -> Path:
        root = self.settings.cache_dir / "cluster" / "suites" / order.suite_sha256
        folder = root / order.suite_name
        if not folder.is_dir():
            scratch = root.with_name(f"{root.name}.{os.getpid()}.{threading.get_ident()}")
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            with tarfile.open(fileobj=io.BytesIO(order.suite_tar)) as tar:
                tar.extractall(scratch, filter="data")
            try:
                scratch.rename(root)
            except OSError:
                shutil.rmtree(scratch, ignore_errors=True)  # another slot unpacked it first
        return folder

    def run_episode(self, run_key: str, task_id: str, trial: int) -> tuple[dict, bytes]:
        """One episode on the next free slot: its record (host and slot named) and its artifacts
        as a tar, which leave this host."""
        slot = self.free_slots.take(lambda: self._run(run_key))
        try:
            run = self._run(run_key)
            record = run.scheduler.run_one(slot, run.tasks[task_id], trial)
        finally:
            self.free_slots.give(slot)
        if record is None:
            raise InfraError(f"host {self.name}: the run ended before {task_id} #{trial} finished")
        record.host = self.name
        return asdict(record), pack_episode(run.folder, task_id, trial)


    def lease(self, run_key: str) -> bool:
        with self._lock:
            known = run_key in self._runs
            if known:
                self.leases.renew(run_key)
        return known

    def end_run(self, run_key: str) -> None:
        """Stops RUN_KEY's episodes (their VMs destroyed) and forgets it."""
        with self._lock:
            run = self._runs.pop(run_key, None)
            self.leases.drop(run_key)
        if run is not None:
            run.scheduler.stop()
            run.scheduler.drain()  # the VMs still being torn down in the background
            shutil.rmtree(run.folder, ignore_errors=True)

    def shutdown(self) -> None:
        """Ends every run: the host is leaving the cluster."""
        for key in list(self._runs):
            self.end_run(key)

    def _run(self, run_key: str) -> HostRun:
        with self._lock:
            run = self._runs.get(run_key)
        if run is None:
            raise InfraError(f"host {self.name} has no run {run_key}: it was never begun here, or its "
                             "driver stopped renewing its lease")
        return run

    def _watch_leases(self) -> None:
        while True:
            time.sleep(LEASE_CHECK_S)
            for key in self.leases.expired():
                log.warning("host %s: the driver of run %s is gone; destroying its VMs", self.name, key)
                self.end_run(key)


def pack_suite(suite: Suite) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(suite.folder, arcname=suite.folder.name,
                filter=lambda info: None if "__pycache__" in info.name else info)
    return buffer.getvalue()


def pack_episode(folder: Path, task_id: str, trial: int) -> bytes:
    """The episode folder, its failed attempts' folders and the task's control episodes (a verifier
    that gave no verdict, judged: runner.runs.scheduler) as a tar, then removed here."""
    parent = folder / task_id
    names = sorted(p.name for p in parent.iterdir() if p.name == str(trial) or p.name.startswith(
        (f"{trial}.infra-attempt-", "control-"))) if parent.is_dir() else []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in names:
            tar.add(parent / name, arcname=name)
    for name in names:
        shutil.rmtree(parent / name, ignore_errors=True)
    return buffer.getvalue()


def unpack_episode(data: bytes, task_dir: Path) -> None:
    """The driver's side of pack_episode: into the run folder's TASK_DIR, nothing outside it."""
    private_dir(task_dir)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(task_dir, filter="data")
