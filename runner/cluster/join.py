"""`cu-run host join ADDRESS`: this machine becomes a cu-run host of the cluster at ADDRESS.

It checks first that the machine can run episodes (doctor's checks; a missing image is fine,
the driver sends it), then starts a Ray node that advertises its slots, places the host
actor on it, and serves until Ctrl-C or SIGTERM, when it ends its runs (their VMs destroyed)
and leaves.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Callable

from runner.cluster.nodes import place_host_actor, remove_host_actor, start_host_node, stop_node, wait_for_node
from runner.cluster.ray_link import check_address, connect, disconnect, require_ray, require_token
from runner.config import Settings, private_dir
from runner.vm.doctor import Check, run_checks
from runner.errors import InfraError, UsageError

# A host needs no image of its own (the driver sends one) and builds none.
NOT_NEEDED_BY_A_HOST = {"images", "image tools"}


def host_blockers(checks: list[Check]) -> list[Check]:
    """The failed checks that stop this machine from running episodes as a cluster host."""
    return [c for c in checks if c.status == "fail" and c.name not in NOT_NEEDED_BY_A_HOST
            and not c.name.startswith("licence ")]


def join(address: str, settings: Settings, slots: int, name: str | None, say: Callable[[str], None],
         stopping: Callable[[], bool]) -> None:
    if slots < 1:
        raise UsageError("--slots must be at least 1")
    require_ray()
    check_address(address)
    require_token()
    blockers = host_blockers(run_checks(settings))
    if blockers:
        raise UsageError("this machine cannot run episodes: " + "; ".join(f"{c.name}: {c.detail}" for c in blockers),
                         fix="; ".join(c.fix for c in blockers if c.fix) or "see cu-run doctor")
    name = name or platform.node()
    private_dir(settings.cache_dir)
    log = settings.cache_dir / "ray-node.log"
    env = {k: os.environ[k] for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH") if k in os.environ}
    say(f"joining {address} as host {name} ({slots} slots, cache {settings.cache_dir}); node log {log}")
    node = start_host_node(address, name, slots, log, env)
    actor = None
    try:
        ray = connect(address)
        wait_for_node(ray, name)
        actor = place_host_actor(ray, name, settings.cache_dir, slots)
        say(f"host {name} is serving; Ctrl-C leaves the cluster")
        while not stopping():
            if node.poll() is not None:
                raise InfraError(f"this machine's Ray node stopped (exit {node.returncode}); see {log}",
                                 fix=f"join again: cu-run host join {address}")
            node_wait(node, 1.0)
    finally:
        try:
            import ray

            if actor is not None and ray.is_initialized():
                remove_host_actor(ray, actor)
        finally:
            disconnect()
            stop_node(node)
        say(f"host {name} left {address}")


def node_wait(node: subprocess.Popen, seconds: float) -> None:
    try:
        node.wait(seconds)
    except subprocess.TimeoutExpired:
        pass
