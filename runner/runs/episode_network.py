"""A networked episode's boundary, up for the episode and down after it: its services, its proxy,
the carriers that are the guest's only way to the proxy, and the guest's end of them
(docs/network.md).

A task without `network:` gets none of this: its guest keeps no route anywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.assets import ASSETS_ENV, AssetStore, sha256_file
from runner.choices import NetMode
from runner.errors import InfraError, UsageError
from runner.network.cassette import CASSETTE, check_cassette
from runner.network.carriers import FORWARDER, GUEST_CARRIER_PORT, GUEST_PROXY_PORT, Carriers
from runner.network.proxy import CA_CERT_FILE, EpisodeProxy, ProxyConfig, make_run_ca, proxy_env
from runner.network.proxy_log import DROPPED, TUNNEL
from runner.network.services import ContainerService, FolderService, LocalService, container_runtime
from runner.network.settings import NetHosts, NetSettings
from runner.profiles.parts import NetworkEnd
from runner.scoring.safety import Violation
from runner.tasks.model import STORED, ServiceSpec, Task
from runner.vm.episode import EpisodeVM

NETWORK_RULE = "network"
MAX_URL = 300  # of a refused URL in a violation: the guest wrote it
REFUSED_AS_SENT = "refused as sent"  # mitmproxy refused it before any rule: malformed, smuggling, too large


@dataclass
class EpisodeNetwork:
    proxy: EpisodeProxy

    def violations(self, since: float, until: float) -> list[Violation]:
        """Every request the proxy refused between SINCE and UNTIL (the agent's time, on the host's
        monotonic clock, which a frozen clock leaves alone), whichever of its rules or limits
        refused it (proxy_addon.py), and the refusals past network.jsonl's cap, counted there."""
        def refused(entry: dict) -> bool:
            return entry.get("verdict") == "refused" and since <= float(entry.get("mono", -1)) <= until

        found = []
        entries = self.proxy.entries()
        # A refused CONNECT let through to read what it carries (proxy_addon.py: TUNNEL) is written
        # as it comes; a line in it that names the page stands for it.
        told = {e[TUNNEL] for e in entries if refused(e) and e.get(TUNNEL) and e.get("stage") != "connect"}
        for entry in entries:
            if entry.get("verdict") == DROPPED:
                found += dropped_refusals(entry, since, until)
            elif refused(entry) and not (entry.get("stage") == "connect" and entry.get(TUNNEL) in told):
                what = REFUSED_AS_SENT if entry.get("stage") == "read" else "outside the allowed origins"
                url = str(entry.get("url") or "(no URL)")[:MAX_URL]
                found.append(Violation(NETWORK_RULE, None, f"{what}: {url} ({str(entry.get('reason', ''))[:MAX_URL]})"))
        return found


def dropped_refusals(entry: dict, since: float, until: float) -> list[Violation]:
    """The violation a `dropped` line holds: refusals not written past the cap, when the first and
    the last of them span any of the agent's time. One violation for them all: which fell inside
    the window is not known."""
    refused = int((entry.get("dropped") or {}).get("refused", 0))
    first, last = (entry.get("refused_mono") or (None, None))[:2]
    if not refused or first is None or last is None or float(first) > until or float(last) < since:
        return []
    return [Violation(NETWORK_RULE, None, f"{refused} refused requests past network.jsonl's {entry.get('lines')} lines "
                                          "(counted, not written)")]


@contextmanager
def episode_network(vm: EpisodeVM, task: Task, ep_dir: Path, cache_dir: Path,
                    net: NetSettings) -> Iterator[EpisodeNetwork]:
    """TASK's network for the episode on VM. NET's mode: live, record (the answers to
    ep_dir/cassette.jsonl) or replay (the task's cassette alone: no service runs, nothing is
    connected to); its hosts file leads allowed names elsewhere while the proxy connects."""
    spec = task.spec.network
    assert spec is not None, "a task without network: gets none"
    end = task.guest.needs(NetworkEnd, f"{task.id}'s network:")  # the plan refused it already: this says why
    mitmdump = proxy_env(cache_dir)
    ca_dir = vm.workdir / "network-ca"  # the run's own 0700 folder, removed with the VM: the key stays here
    make_run_ca(ca_dir)
    hosts = net.hosts or NetHosts()
    with ExitStack() as stack:
        if net.mode == NetMode.replay:
            services: list[LocalService] = []
            cassette: Path | None = replay_cassette(task, net.assets).path
        else:
            services = [stack.enter_context(service_for(s, task.folder)) for s in spec.services]
            cassette = ep_dir / CASSETTE if net.mode == NetMode.record else None
        proxy = EpisodeProxy(mitmdump, ca_dir, ep_dir, ProxyConfig(
            allow=spec.origins(), mapped={**hosts.hosts, **{s.name: s.address for s in services}},
            plain=tuple(s.name for s in services), background=end.background,
            mode=net.mode, cassette=cassette, upstream_ca=hosts.ca,
            clock=task.spec.clock))
        # The proxy starts while the guest's end does (bench/web_task.py: each takes about half a
        # second or more): nothing reaches it before the guest's end is up and it is ready.
        stack.callback(proxy.stop)
        proxy.start()
        carrier_port = vm.host.free_port()
        vm.host.add_forward(vm.name, carrier_port, GUEST_CARRIER_PORT)
        stack.enter_context(Carriers(carrier_port, proxy.address))
        script = end.start_script(FORWARDER.read_bytes(), (ca_dir / CA_CERT_FILE).read_bytes(), vm.desktop_user,
                                  GUEST_PROXY_PORT)
        started = vm.admin_shell.run(script, timeout=120)
        if not started.ok:
            raise InfraError(f"{vm.name}: the guest's end of the network did not start: "
                             f"{(started.stdout + started.stderr).strip()[-500:]}")
        proxy.wait_ready()
        (ep_dir / "network.json").write_text(json.dumps({
            "mode": str(net.mode), "allow": list(spec.origins()), "services": {s.name: s.source for s in services},
            "cassette": str(cassette) if cassette else None,
            "guest_proxy": f"http://127.0.0.1:{GUEST_PROXY_PORT}",
            "guest_forwarder": forwarder_start(started.stdout)}, indent=2) + "\n")
        yield EpisodeNetwork(proxy)


def forwarder_start(said: str) -> str | None:
    """How the guest's end says its forwarder came up: "woken" (the warm state's, kept dormant:
    NetworkEnd.warm_script) or "started" (here); None when it does not say."""
    found = re.findall(r"^forwarder: (woken|started)$", said, flags=re.MULTILINE)
    return found[-1] if found else None


def service_for(spec: ServiceSpec, folder: Path) -> LocalService:
    """The server a task's service names: its folder served, or its image run by the host's engine."""
    if spec.serve is not None:
        return FolderService(spec.name, folder / spec.serve)
    assert spec.image is not None
    return ContainerService(spec.name, spec.image, spec.port, spec.ready, container_runtime())


@dataclass(frozen=True)
class Cassette:
    path: Path
    sha256: str


def replay_cassette(task: Task, assets: Path | None) -> Cassette:
    """The cassette TASK replays from, hashed: a file of its folder, or sha256:HEX kept in the asset
    store ASSETS (checked against its name). UsageError when it has none, or it is not there."""
    spec = task.spec.network
    named = spec.replay if spec is not None else None
    if named is None:
        raise UsageError(f"--net replay: task {task.id} has no cassette to replay",
                         fix="record one with --net record, then keep it: cu-run assets cassettes RUN_DIR --assets DIR")
    if not STORED.match(named):
        path = task.folder / named
        if not path.is_file():
            raise UsageError(f"--net replay: task {task.id}'s cassette {path} is not a file")
        return Cassette(_checked(task, path), sha256_file(path))
    if assets is None:
        raise UsageError(f"--net replay: task {task.id}'s cassette is {named[:19]}... in an asset store, and none was given",
                         fix=f"pass --assets DIR (or set {ASSETS_ENV})")
    sha256 = named.removeprefix("sha256:")
    blob, problem = AssetStore(assets).checked_blob(sha256)
    if problem:
        raise UsageError(f"--net replay: task {task.id}'s cassette: {problem}",
                         fix="keep it again from its recording: cu-run assets cassettes RUN_DIR --assets DIR")
    return Cassette(_checked(task, blob), sha256)


def _checked(task: Task, path: Path) -> Path:
    """PATH, when it reads as a cassette; else the task's defect, said before any VM starts."""
    try:
        check_cassette(path)
    except ValueError as exc:
        raise UsageError(f"--net replay: task {task.id}'s cassette cannot be replayed: {exc}",
                         fix="record it again with --net record, then keep it: cu-run assets cassettes RUN_DIR "
                             "--assets DIR") from None
    return path


def cassette_hashes(tasks: tuple[Task, ...], net: NetSettings) -> dict[str, str]:
    """run.json's record of what a replay answered from: each networked task's cassette, by sha256."""
    if net.mode != NetMode.replay:
        return {}
    return {t.id: replay_cassette(t, net.assets).sha256 for t in tasks if t.spec.network}
