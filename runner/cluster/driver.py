"""`cu-run run|validate --cluster ADDRESS`: a run whose episodes go to the cluster's cu-run hosts.

Before any VM starts: connect (token checked), find the hosts (version checked), give every
host the driver's image if it lacks that exact sha256, and begin the run on each (suite
unpacked, agent made, warm states made at first use). Then the driver's queue feeds every
host's slots (runner.cluster.dispatch) while a lease tells the hosts the driver is alive.
Results, artifacts and reports land in the driver's run folder exactly as on one machine.
"""

from __future__ import annotations

import io
import secrets
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from collections.abc import Iterator

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from runner.cluster.dispatch import ClusterPool, HostLost
from runner.cluster.host_service import RunOrder
from runner.cluster.image_transfer import ship_image
from runner.cluster.ray_link import HostLink, connect, disconnect, find_hosts, host_lost_errors
from runner.config import private_dir
from runner.errors import InfraError
from runner.images.catalog import Image
from runner.runs.results import ResultLog
from runner.runs.run import (RunPlan, RunRequest, RunResult, base_provenance, finish_run, finishing, print_record,
                             write_json)
from runner.tasks.model import Suite

LEASE_EVERY_S = 5.0
BEGIN_TIMEOUT_S = 1800.0  # warming every slot of a host at first use, under TCG


class RayHost:
    """A cluster host as the dispatcher sees it (runner.cluster.dispatch.RemoteHost)."""

    def __init__(self, ray, link: HostLink, run_key: str, slots: int) -> None:
        self.ray = ray
        self.link = link
        self.name = link.name
        self.run_key = run_key
        self.slots = slots
        self._lost = host_lost_errors(ray)

    def run_episode(self, task_id: str, trial: int, slot: int, stop: threading.Event) -> tuple[dict, bytes]:
        # SLOT is the driver's lane on this host; the host picks the machine slot itself.
        ref = self.link.actor.run_episode.remote(self.run_key, task_id, trial)
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


def run_on_cluster(request: RunRequest, plan: RunPlan, console: Console) -> RunResult:
    address = request.cluster
    assert address is not None
    if request.vm_pool != 1:
        console.print(f"[yellow]--vm-pool {request.vm_pool} is not used with --cluster: each host runs one "
                      "episode per slot (host join --slots)[/]")
    ray = connect(address)
    run_key = f"{plan.out_dir.name}-{secrets.token_hex(3)}"
    begun: list[tuple[HostLink, dict]] = []
    try:
        links = find_hosts(ray, address)
        console.print(f"cluster {address}: {len(links)} cu-run hosts: "
                      + ", ".join(f"{h.name} ({h.info['slots']} slots, {h.info['accel'].upper()})" for h in links))
        ensure_image(ray, links, plan.image, console)
        order = _order(request, plan, run_key)
        begun = begin_everywhere(ray, links, order, console)
        log = ResultLog(plan.out_dir)
        finished = log.finished()
        work = [(t, trial) for trial in range(1, request.trials + 1) for t in plan.tasks
                if (t.id, trial) not in finished]
        private_dir(plan.out_dir)
        provenance = base_provenance(request, plan, {
            "cluster": {"address": address, "run_key": run_key},
            "hosts": {link.name: _host_provenance(link, started) for link, started in begun},
        })
        if plan.previous:
            provenance.setdefault("hosts", {}).update({link.name: _host_provenance(link, s) for link, s in begun})
        write_json(plan.out_dir / "run.json", provenance)
        slots = sum(s["slots"] for _, s in begun)
        console.print(f"run {plan.out_dir}: {len(work)} episodes to go "
                      f"({len(plan.tasks)} tasks x {request.trials} trials, {len(finished)} done before), "
                      f"{slots} slots on {len(begun)} hosts, agent {plan.agent.name}")
        pool = ClusterPool([RayHost(ray, link, run_key, started["slots"]) for link, started in begun], plan.out_dir,
                           log, on_record=lambda r: print_record(console, r),
                           on_notice=lambda m: console.print(f"[yellow]{escape(m)}[/]", highlight=False))
        with finishing(plan, request, log, provenance, console), leases(ray, [link for link, _ in begun], run_key):
            _run_pool(pool, work, console)
    finally:
        for link, _ in begun:
            try:
                link.actor.end_run.remote(run_key)
            except Exception:  # noqa: BLE001 - a lost host has nothing left to end
                pass
        disconnect()
    why = None
    if pool.lost_hosts and not pool.alive:
        why = "no cu-run host is left in the cluster (" + "; ".join(
            f"{name}: {reason}" for name, reason in pool.lost_hosts.items()) + ")"
    return finish_run(plan, request, log, provenance, console, why_lost=why)


def _order(request: RunRequest, plan: RunPlan, run_key: str) -> RunOrder:
    return RunOrder(run_key=run_key, suite_name=plan.suite.folder.name, suite_sha256=plan.suite.content_hash(),
                    suite_tar=pack_suite(plan.suite), image=plan.image.name,
                    image_sha256=plan.image.manifest.disk_sha256, agent=plan.agent.name, accel=request.accel,
                    start=request.start, agent_cmd=request.agent_cmd, max_turns=request.max_turns,
                    agent_script=request.agent_script, tools=request.tools, max_steps=request.max_steps,
                    record=request.record, mcp_server=request.mcp_server, mcp_server_url=request.mcp_server_url)


def pack_suite(suite: Suite) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(suite.folder, arcname=suite.folder.name,
                filter=lambda info: None if "__pycache__" in info.name else info)
    return buffer.getvalue()


def ensure_image(ray, links: list[HostLink], image: Image, console: Console) -> None:
    """Every host gets IMAGE's exact disk (by sha256), one copy per host, in parallel."""
    need = [h for h in links if image.manifest.disk_sha256 not in {i["sha256"] for i in h.info["images"]}]
    if not need:
        return
    console.print(f"sending {image.name} ({image.manifest.disk_bytes / 2**20:.0f} MiB) to "
                  + ", ".join(h.name for h in need))
    say = lambda line: console.print(escape(line), highlight=False)  # noqa: E731
    with ThreadPoolExecutor(len(need)) as pool:
        for future in [pool.submit(ship_image, ray, h.actor, h.name, image, say) for h in need]:
            future.result()


def begin_everywhere(ray, links: list[HostLink], order: RunOrder, console: Console) -> list[tuple[HostLink, dict]]:
    """Begins ORDER on every host at once. A host that cannot begin is left out, saying why;
    the run goes on with the rest, and stops with the reasons when none could."""
    refs = {h.name: h.actor.begin_run.remote(order) for h in links}
    begun, failed = [], []
    with console.status("getting the hosts ready (image checked; warm states made at first use)"):
        for h in links:
            try:
                started = ray.get(refs[h.name], timeout=BEGIN_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - said, and the host left out
                cause = getattr(exc, "cause", None) or exc
                failed.append(f"{h.name}: {_first_line(cause)}")
                continue
            begun.append((h, started))
            notes = "; ".join(started["notes"])
            console.print(f"{h.name}: {started['slots']} slots, {started['accel'].upper()}, {started['start']} start"
                          + (f" ({escape(notes)})" if notes else ""), highlight=False)
    for line in failed:
        console.print(f"[yellow]left out: {escape(line)}[/]", highlight=False)
    if not begun:
        raise InfraError("no cu-run host could begin the run: " + "; ".join(failed),
                         fix="see `cu-run cluster status ADDRESS`, fix the hosts and run again")
    return begun


@contextmanager
def leases(ray, links: list[HostLink], run_key: str) -> Iterator[None]:
    """Renews the run's lease on every host while the block runs: a driver that dies stops
    renewing, and the hosts destroy its VMs (runner.cluster.host_service.LEASE_S)."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(LEASE_EVERY_S):
            for link in links:
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


def _run_pool(pool: ClusterPool, work, console: Console) -> None:
    if work:
        with Live(_status_table(pool), console=console, refresh_per_second=2, transient=True) as live:
            pool.run(work, render=lambda: live.update(_status_table(pool)))


def _status_table(pool: ClusterPool) -> Table:
    table = Table("host", "slot", "task", "trial", "elapsed", title="episodes in flight")
    now = time.monotonic()
    for (host, slot), s in sorted(pool.status.items()):
        gone = " (lost)" if host in pool.lost_hosts else ""
        table.add_row(escape(host) + gone, str(slot), escape(s.task_id) or "-", str(s.trial or "-"),
                      f"{now - s.since:.0f} s" if s.task_id else "-")
    return table


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def warm_on_cluster(image: Image, address: str, accel: str, force: bool, console: Console) -> None:
    """`cu-run image warm IMAGE --cluster ADDRESS`: the image sent where it is missing, then each
    host's warm states made on that host (they are tied to its CPU and QEMU)."""
    ray = connect(address)
    try:
        links = find_hosts(ray, address)
        ensure_image(ray, links, image, console)
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
