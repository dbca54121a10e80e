"""Ray nodes and host actors: what `cluster local` and `host join` both start and stop.

A cu-run host is a Ray node that advertises its slots (the custom resource cu_run_slots) and
a resource of its own name, plus a detached actor pinned to that node by that resource. Ray
restarts the actor when its node comes back (max_restarts=-1); the new actor collects what
the old one left. Each node runs under `ray start --block`, whose end stops the node.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from runner.cluster.ray_link import HOST_PREFIX, NAMESPACE, SLOTS_RESOURCE, node_resource, token_env
from runner.errors import InfraError

NODE_UP_TIMEOUT_S = 120.0
ACTOR_UP_TIMEOUT_S = 300.0  # the actor's first gc and the accelerator probe (a VM boot) come first


def ray_command() -> str:
    """The `ray` of this Python: the nodes' workers must import this cu-run."""
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else (shutil.which("ray") or "ray")


def start_head(port: int, log: Path, env: dict[str, str], dashboard_port: int) -> subprocess.Popen:
    """A head node with no slots of its own: the cluster's membership, scheduler and dashboard."""
    argv = [ray_command(), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=0",
            "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard_port}", "--disable-usage-stats", "--block"]
    return _spawn(argv, log, env)


def start_host_node(address: str, name: str, slots: int, log: Path, env: dict[str, str],
                    node_ip: str | None = None) -> subprocess.Popen:
    resources = json.dumps({SLOTS_RESOURCE: slots, node_resource(name): 1})
    argv = [ray_command(), "start", f"--address={address}", f"--resources={resources}", "--num-cpus=1",
            "--disable-usage-stats", "--block"]
    if node_ip:
        argv.append(f"--node-ip-address={node_ip}")
    return _spawn(argv, log, env)


def _spawn(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("ab") as out:
        # A session of its own: Ctrl-C in the terminal reaches cu-run, which stops the nodes in order.
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=token_env(env),
                                start_new_session=True)


def raylet_pid(node: subprocess.Popen, timeout: float = NODE_UP_TIMEOUT_S) -> int:
    """The pid of the raylet NODE started: what a test kills to take the node down."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.poll() is not None:
            raise InfraError(f"the Ray node (pid {node.pid}) exited with {node.returncode} before its raylet started")
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)
            except OSError:
                continue
            name = fields[0].split("(", 1)[1]
            if name == "raylet" and int(fields[1].split()[1]) == node.pid:
                return int(stat.parent.name)
        time.sleep(0.2)
    raise InfraError(f"the Ray node (pid {node.pid}) did not start a raylet in {timeout:.0f} s")


def wait_for_node(ray, name: str, timeout: float = NODE_UP_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(n["Alive"] and n["Resources"].get(node_resource(name)) for n in ray.nodes()):
            return
        time.sleep(0.5)
    raise InfraError(f"host {name}'s Ray node did not join the cluster in {timeout:.0f} s")


def place_host_actor(ray, name: str, cache_dir: Path, slots: int):
    """Host NAME's actor on its own node, made if it is not there yet; waits until it answers."""
    from runner.cluster.host_service import HostService

    actor_class = ray.remote(HostService)
    actor = actor_class.options(name=HOST_PREFIX + name, namespace=NAMESPACE, lifetime="detached",
                                get_if_exists=True, resources={node_resource(name): 1}, num_cpus=0,
                                max_restarts=-1, max_task_retries=0, max_concurrency=slots + 16).remote(
        name, str(cache_dir), slots)
    ray.get(actor.info.remote(), timeout=ACTOR_UP_TIMEOUT_S)
    return actor


def remove_host_actor(ray, actor, timeout: float = 120.0) -> None:
    """Ends the host's runs (their VMs destroyed), then the actor itself."""
    try:
        ray.get(actor.shutdown.remote(), timeout=timeout)
    except Exception:  # noqa: BLE001 - a host already gone has nothing to end
        pass
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001
        pass


def stop_node(node: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM to `ray start --block`, which stops the node's processes; SIGKILL to the group after."""
    if node.poll() is None:
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(node.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    node.wait()
