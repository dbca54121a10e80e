"""A networked episode's boundary, up for the episode and down after it: its services, its proxy,
the carriers that are the guest's only way to the proxy, and the guest's end of them
(docs/network.md).

A task without `network:` gets none of this: its guest keeps no route anywhere.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.choices import NetMode
from runner.errors import InfraError, UsageError
from runner.network.carriers import GUEST_CARRIER_PORT, GUEST_PROXY_PORT, Carriers
from runner.network.proxy import CA_CERT_FILE, EpisodeProxy, ProxyConfig, make_run_ca, proxy_env
from runner.network.services import FolderService
from runner.scoring.safety import Violation
from runner.tasks.model import Task
from runner.vm.episode import EpisodeVM

FORWARDER = Path(__file__).parents[1] / "network" / "guest_forwarder.py"
NETWORK_RULE = "network"
MAX_URL = 300  # of a refused URL in a violation: the guest wrote it


@dataclass
class EpisodeNetwork:
    proxy: EpisodeProxy

    def violations(self, since: float, until: float) -> list[Violation]:
        """Every request the proxy refused between SINCE and UNTIL (the agent's time, on the host's
        monotonic clock, which a frozen clock leaves alone): each one is a request outside the
        allowed origins."""
        found = []
        for entry in self.proxy.entries():
            if entry.get("verdict") == "refused" and since <= float(entry.get("mono", -1)) <= until:
                url = str(entry.get("url", ""))[:MAX_URL]
                found.append(Violation(NETWORK_RULE, None, f"outside the allowed origins: {url} "
                                                           f"({str(entry.get('reason', ''))[:MAX_URL]})"))
        return found


CASSETTE = "cassette.jsonl"  # what --net record writes in each episode's folder


@contextmanager
def episode_network(vm: EpisodeVM, task: Task, ep_dir: Path, cache_dir: Path,
                    mode: NetMode = NetMode.live) -> Iterator[EpisodeNetwork]:
    """TASK's network for the episode on VM. MODE: live, record (the answers to ep_dir/cassette.jsonl)
    or replay (the task's cassette alone: no service runs, nothing is connected to)."""
    spec = task.spec.network
    assert spec is not None, "a task without network: gets none"
    mitmdump = proxy_env(cache_dir)
    ca_dir = vm.workdir / "network-ca"  # the run's own 0700 folder, removed with the VM: the key stays here
    make_run_ca(ca_dir)
    with ExitStack() as stack:
        if mode == NetMode.replay:
            services: list[FolderService] = []
            cassette: Path | None = replay_cassette(task)
        else:
            services = [stack.enter_context(FolderService(s.name, task.folder / s.serve)) for s in spec.services]
            cassette = ep_dir / CASSETTE if mode == NetMode.record else None
        proxy = stack.enter_context(EpisodeProxy(mitmdump, ca_dir, ep_dir, ProxyConfig(
            allow=spec.origins(), mapped={s.name: s.address for s in services}, plain=tuple(s.name for s in services),
            mode=mode, cassette=cassette,
            clock=task.spec.clock)))
        carrier_port = vm.host.free_port()
        vm.host.add_forward(vm.name, carrier_port, GUEST_CARRIER_PORT)
        stack.enter_context(Carriers(carrier_port, proxy.address))
        script = task.guest.network_start_script(FORWARDER.read_bytes(), (ca_dir / CA_CERT_FILE).read_bytes(),
                                                 vm.desktop_user, GUEST_PROXY_PORT)
        if script is None:
            raise UsageError(f"{task.id}: {task.guest.name} guests have no network end yet (docs/network.md)")
        started = vm.admin_shell.run(script, timeout=120)
        if not started.ok:
            raise InfraError(f"{vm.name}: the guest's end of the network did not start: "
                             f"{(started.stdout + started.stderr).strip()[-500:]}")
        (ep_dir / "network.json").write_text(json.dumps({
            "mode": str(mode), "allow": list(spec.origins()), "services": {s.name: s.folder.name for s in services},
            "cassette": str(cassette) if cassette else None,
            "guest_proxy": f"http://127.0.0.1:{GUEST_PROXY_PORT}"}, indent=2) + "\n")
        yield EpisodeNetwork(proxy)


def replay_cassette(task: Task) -> Path:
    """The cassette TASK replays from; UsageError when it has none (checked before any VM starts)."""
    spec = task.spec.network
    path = task.folder / spec.replay if spec is not None and spec.replay else None
    if path is None or not path.is_file():
        raise UsageError(f"--net replay: task {task.id} has no cassette to replay"
                         + (f" ({path} is not a file)" if path is not None else ""),
                         fix="record one with --net record, then name it in the task's network: replay:")
    return path


def cassette_hashes(tasks: tuple[Task, ...], mode: NetMode) -> dict[str, str]:
    """run.json's record of what a replay answered from: each networked task's cassette, by sha256."""
    if mode != NetMode.replay:
        return {}
    return {t.id: hashlib.sha256(replay_cassette(t).read_bytes()).hexdigest() for t in tasks if t.spec.network}
