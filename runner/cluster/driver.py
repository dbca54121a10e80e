"""`cu-run run|validate --cluster ADDRESS`: a run whose pool is the cluster's cu-run hosts.

Before any VM starts: connect (token checked), find the hosts (version checked), give every
host the driver's image if it lacks that exact sha256, and begin the run on each (suite
unpacked, agent made, warm states made at first use). Then the driver's queue feeds every
host's slots (runner.cluster.dispatch) while a lease tells the hosts the driver is alive.
Results, artifacts and reports land in the driver's run folder exactly as on one machine.
"""

from __future__ import annotations

import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from typing_extensions import override
from rich.markup import escape

from runner.cluster.dispatch import ClusterPool, HostLost, RemoteHost, RunOutput
from runner.cluster.host_service import RunOrder
from runner.cluster.image_transfer import ship_image
from runner.cluster.ray_link import HostLink, connect, disconnect, find_hosts, host_lost_errors
from runner.config import Settings
from runner.errors import InfraError
from runner.images.catalog import Image
from runner.live.board import LiveSource
from runner.runs.pool import Episode, Notice, Pool, PoolRun, SlotState, shared_image
from runner.records.results import ResultLog

LEASE_EVERY_S = 5.0
BEGIN_TIMEOUT_S = 1800.0  # warming every slot of a host at first use, under TCG


class RayHost(RemoteHost):
    """A cluster host as the dispatcher sees it (runner.cluster.dispatch.RemoteHost)."""

    def __init__(self, ray, link: HostLink, run_keys: list[str], slots: int) -> None:
        self.ray = ray
        self.link = link
        self.name = link.name
        self.run_keys = run_keys  # each of the pool's runs, as this host knows it
        self.slots = slots
        self._lost = host_lost_errors(ray)

    @override
    def run_episode(self, run: int, task_id: str, trial: int, slot: int, stop: threading.Event) -> tuple[dict, bytes]:
        # SLOT is the driver's lane on this host; the host picks the machine slot itself.
        ref = self.link.actor.run_episode.remote(self.run_keys[run], task_id, trial)
        while True:
            try:
                return self.ray.get(ref, timeout=1.0)
            except self.ray.exceptions.GetTimeoutError:
                if stop.is_set():
                    raise InfraError("the run was stopped") from None
            except self._lost as exc:
                raise HostLost(_first_line(exc)) from exc
            except self.ray.exceptions.RayTaskError as exc:
                raise InfraError(_first_line(exc.cause if exc.cause is not None else exc)) from exc


class ClusterRunPool(Pool):
    """Runs' pool on a cluster: the driver's queue over every host's slots (runner.cluster.dispatch)."""

    def __init__(self, queue: ClusterPool, address: str, run_keys: list[str],
                 begun: list[list[tuple[HostLink, dict]]]) -> None:
        self.queue = queue
        self.address = address
        self.run_keys = run_keys
        self.begun = begun  # per run: each host that began it, with what it said

    @override
    def where(self, run: int = 0) -> dict[str, Any]:
        return {"cluster": {"address": self.address, "run_key": self.run_keys[run]},
                "hosts": {link.name: _host_provenance(link, started) for link, started in self.begun[run]}}

    @override
    def describe(self) -> str:
        return f"{sum(s['slots'] for _, s in self.begun[0])} slots on {len(self.begun[0])} hosts"

    @override
    def run(self, work: list[Episode], render: Callable[[], None] = lambda: None) -> None:
        self.queue.run(work, render)

    @override
    def status(self) -> list[SlotState]:
        lost = self.queue.lost_hosts
        return [SlotState(host + (" (lost)" if host in lost else ""), slot, v.task_id, v.trial,
                          "episode" if v.task_id else "idle", v.since)
                for (host, slot), v in sorted(self.queue.status.items())]

    @override
    def lost(self) -> str | None:
        if self.queue.lost_hosts and not self.queue.alive:
            return "no cu-run host is left in the cluster (" + "; ".join(
                f"{name}: {reason}" for name, reason in self.queue.lost_hosts.items()) + ")"
        return None

    @override
    def live_source(self, title: str, total: int, done_before: int) -> LiveSource | None:
        return None  # the VMs are on the hosts (check_live_options refuses --live with --cluster)


@contextmanager
def open_cluster_pool(settings: Settings, runs: tuple[PoolRun, ...], notice: Notice) -> Iterator[Pool]:
    """The pool of the cluster at the first run's --cluster for RUNS (a run's, or a study's
    arms, which share one image): its hosts found (token and version checked), the driver's
    image sent to those without it, each run begun on each (suite unpacked, agent made, warm
    states made at first use), and a lease renewed while the pool runs. However the block ends,
    every host ends every run (its VMs destroyed) and the connection closes."""
    first = runs[0].request
    address = first.where.cluster
    assert address is not None
    image = shared_image(runs)
    if first.how.vm_pool != 1:
        notice(f"--vm-pool {first.how.vm_pool} is not used with --cluster: each host runs one "
               "episode per slot (host join --slots)")
    ray = connect(address)
    token = secrets.token_hex(3)
    run_keys = [f"{r.plan.out_dir.name}-{token}" for r in runs]
    begun: list[list[tuple[HostLink, dict]]] = []
    try:
        links = find_hosts(ray, address)
        notice(f"cluster {address}: {len(links)} cu-run hosts: "
               + ", ".join(f"{h.name} ({h.info['slots']} slots, {h.info['accel'].upper()})" for h in links))
        ensure_image(ray, links, image, notice)
        for r, key in zip(runs, run_keys, strict=True):
            begun.append(begin_everywhere(ray, links, RunOrder.of(r.request, r.plan, key), notice))
        # A host serves the pool only if it began every run: an episode of any may go to it.
        everywhere = set.intersection(*({link.name for link, _ in b} for b in begun))
        if not everywhere:
            raise InfraError("no cu-run host could begin every run of the pool",
                             fix="see `cu-run cluster status ADDRESS`, fix the hosts and run again")
        hosts: list[RemoteHost] = [RayHost(ray, link, run_keys, started["slots"]) for link, started in begun[0]
                                   if link.name in everywhere]
        queue = ClusterPool(hosts, [RunOutput(r.plan.out_dir, ResultLog(r.plan.out_dir), r.on_record) for r in runs],
                            on_notice=notice)
        with leases(ray, [link for link, _ in begun[0] if link.name in everywhere], run_keys):
            yield ClusterRunPool(queue, address, run_keys, begun)
    finally:
        for b, key in zip(begun, run_keys, strict=False):
            for link, _ in b:
                try:
                    link.actor.end_run.remote(key)
                except Exception:  # noqa: BLE001 - a lost host has nothing left to end
                    pass
        disconnect()


def ensure_image(ray, links: list[HostLink], image: Image, say: Callable[[str], None]) -> None:
    """Every host gets IMAGE's exact disk (by sha256), one copy per host, in parallel."""
    need = [h for h in links if image.manifest.disk_sha256 not in {i["sha256"] for i in h.info["images"]}]
    if not need:
        return
    say(f"sending {image.name} ({image.manifest.disk_bytes / 2**20:.0f} MiB) to " + ", ".join(h.name for h in need))
    with ThreadPoolExecutor(len(need)) as pool:
        for future in [pool.submit(ship_image, ray, h.actor, h.name, image, say) for h in need]:
            future.result()


def begin_everywhere(ray, links: list[HostLink], order: RunOrder,
                     say: Callable[[str], None]) -> list[tuple[HostLink, dict]]:
    """Begins ORDER on every host at once (each checks its image and makes its warm states at
    first use). A host that cannot begin is left out, saying why; the run goes on with the
    rest, and stops with the reasons when none could."""
    refs = {h.name: h.actor.begin_run.remote(order) for h in links}
    begun, failed = [], []
    say("getting the hosts ready (image checked; warm states made at first use)")
    for h in links:
        try:
            started = ray.get(refs[h.name], timeout=BEGIN_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - said, and the host left out
            cause = getattr(exc, "cause", None) or exc
            failed.append(f"{h.name}: {_first_line(cause)}")
            continue
        begun.append((h, started))
        notes = "; ".join(started["notes"])
        say(f"{h.name}: {started['slots']} slots, {started['accel'].upper()}, {started['start']} start"
            + (f" ({notes})" if notes else ""))
    for line in failed:
        say(f"left out: {line}")
    if not begun:
        raise InfraError("no cu-run host could begin the run: " + "; ".join(failed),
                         fix="see `cu-run cluster status ADDRESS`, fix the hosts and run again")
    return begun


@contextmanager
def leases(ray, links: list[HostLink], run_keys: list[str]) -> Iterator[None]:
    """Renews each run's lease on every host while the block runs: a driver that dies stops
    renewing, and the hosts destroy its VMs (runner.cluster.host_service.LEASE_S)."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(LEASE_EVERY_S):
            for link in links:
                for run_key in run_keys:
                    try:
                        link.actor.lease.remote(run_key)
                    except Exception:  # noqa: BLE001 - a lost host is the dispatcher's to notice
                        pass

    threading.Thread(target=renew, name="leases", daemon=True).start()
    try:
        yield
    finally:
        stop.set()


def _host_provenance(link: HostLink, started: dict) -> dict:
    facts = started["facts"]
    return {"cpu": facts["cpu"], "cores": facts["cores"], "memory_gib": facts["memory_gib"],
            "kernel": facts["kernel"], "accel": started["accel"], "accel_probe": started["accel_reason"],
            "qemu": started["versions"].get("hypervisor"), "libvirt": started["versions"].get("libvirt"),
            "slots": started["slots"], "start": started["start"], "notes": started["notes"],
            "hostname": facts["hostname"], "agent_version": started["agent_version"]}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def warm_on_cluster(image: Image, address: str, accel: str, force: bool, console: Console) -> None:
    """`cu-run image warm IMAGE --cluster ADDRESS`: the image sent where it is missing, then each
    host's warm states made on that host (they are tied to its CPU and QEMU)."""
    ray = connect(address)
    try:
        links = find_hosts(ray, address)
        ensure_image(ray, links, image, lambda line: console.print(escape(line), highlight=False))
        refs = {h.name: h.actor.warm.remote(image.name, accel, force) for h in links}
        with console.status(f"warming {image.name} on {len(links)} hosts"):
            for h in links:
                for line in ray.get(refs[h.name], timeout=BEGIN_TIMEOUT_S):
                    console.print(f"{escape(h.name)}: {escape(line)}", highlight=False)
    finally:
        disconnect()


def cluster_status(address: str) -> list[dict]:
    """What each cu-run host of the cluster says of itself (any version: status shows them all)."""
    ray = connect(address)
    try:
        return [h.info for h in find_hosts(ray, address, check_version=False)]
    finally:
        disconnect()
