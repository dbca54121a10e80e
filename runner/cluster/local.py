"""`cu-run cluster local`: a Ray head and N cu-run hosts on this one machine, as if they were N.

Each host is its own Ray node with its own cache folder (DIR/host-<i>): its own catalog, warm
states and episode folders, so it receives images and makes warm states like a separate
machine would. Everything listens on loopback only, behind a token made for this cluster
(DIR/auth_token). A host node that dies is started again, as a machine coming back would be,
and its actor then collects what the dead one left. Ctrl-C or SIGTERM stops every node and
removes the hosts' domains.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.cluster.nodes import (place_host_actor, raylet_pid, remove_host_actor, start_head, start_host_node,
                                  stop_node, wait_for_node)
from runner.cluster.ray_link import HOST_PREFIX, NAMESPACE, connect, disconnect
from runner.config import Settings, private_dir
from runner.errors import InfraError, UsageError
from runner.sockets import free_port

TOKEN_FILE = "auth_token"


@dataclass
class LocalHost:
    name: str
    cache_dir: Path
    node: subprocess.Popen
    pid: int  # the node's raylet


def ensure_token(folder: Path) -> Path:
    """The cluster's token file in FOLDER, made once (0600) and reused, so a restarted local
    cluster keeps the token its clients were given."""
    path = folder / TOKEN_FILE
    if not path.is_file() or not path.read_text().strip():
        path.write_text(secrets.token_hex(32) + "\n")
    path.chmod(0o600)
    return path


class LocalCluster:
    def __init__(self, folder: Path, hosts: int, slots: int, say: Callable[[str], None]) -> None:
        if hosts < 1 or slots < 1:
            raise UsageError("--hosts and --slots must be at least 1")
        self.folder = private_dir(folder.resolve())
        self.n_hosts = hosts
        self.slots = slots
        self.say = say
        self.token = ensure_token(self.folder)
        self.env = {"RAY_AUTH_TOKEN_PATH": str(self.token)}
        self.head: subprocess.Popen | None = None
        self.address = ""
        self.hosts: list[LocalHost] = []

    def start(self) -> dict:
        """Starts the head and every host; what `cluster local` prints."""
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(self.token)
        port, dashboard = free_port(), free_port()
        self.address = f"127.0.0.1:{port}"
        self.say(f"starting a Ray head at {self.address} (dashboard http://127.0.0.1:{dashboard})")
        self.head = start_head(port, self.folder / "head.log", self.env, dashboard)
        _wait_listening(self.head, port, self.folder / "head.log")
        ray = connect(self.address)
        for i in range(self.n_hosts):
            name = f"host-{i}"
            cache_dir = private_dir(self.folder / name)
            self.say(f"starting {name} ({self.slots} slots, cache {cache_dir})")
            node = start_host_node(self.address, name, self.slots, self.folder / f"{name}.log", self.env,
                                   node_ip="127.0.0.1")
            host = LocalHost(name, cache_dir, node, 0)
            self.hosts.append(host)  # before anything can fail: stop() stops every node started
            host.pid = raylet_pid(node)
            wait_for_node(ray, name)
            place_host_actor(ray, name, cache_dir, self.slots)
        # Not a client while serving: Ray's client would take SIGTERM from cu-run's own handler.
        disconnect()
        return self.describe()

    def _end_hosts(self) -> None:
        """Every host actor that was placed ends its runs (their VMs destroyed) and goes."""
        ray = connect(self.address)
        for host in self.hosts:
            try:
                actor = ray.get_actor(HOST_PREFIX + host.name, namespace=NAMESPACE)
            except ValueError:
                continue  # the start stopped before this host's actor was placed
            remove_host_actor(ray, actor)

    def describe(self) -> dict:
        return {"address": self.address, "token_file": str(self.token),
                "hosts": [{"name": h.name, "cache_dir": str(h.cache_dir), "pid": h.pid} for h in self.hosts]}

    def serve(self, stopping: Callable[[], bool]) -> None:
        """Until STOPPING says so: a host node that died is started again."""
        while not stopping():
            for host in self.hosts:
                if host.node.poll() is not None:
                    self.say(f"{host.name}'s node stopped (exit {host.node.returncode}); starting it again")
                    host.node = start_host_node(self.address, host.name, self.slots,
                                                self.folder / f"{host.name}.log", self.env, node_ip="127.0.0.1")
                    host.pid = raylet_pid(host.node)
                    self.say(json.dumps({"restarted": host.name, "pid": host.pid}))
            if self.head is not None and self.head.poll() is not None:
                raise InfraError(f"the Ray head stopped (exit {self.head.returncode}); see {self.folder / 'head.log'}")
            time.sleep(1.0)

    def stop(self) -> None:
        """Every host's runs ended and its actor removed, every node stopped, then each host's
        leftovers collected (their owners are gone now)."""
        try:
            if self.hosts and self.head is not None and self.head.poll() is None:
                self._end_hosts()
        except Exception as exc:  # noqa: BLE001 - the nodes are stopped and collected below all the same
            self.say(f"could not end the hosts' runs through Ray ({exc}); stopping their nodes")
        finally:
            disconnect()
            for host in self.hosts:
                stop_node(host.node)
            if self.head is not None:
                stop_node(self.head)
            for host in self.hosts:
                _collect(host)


def _collect(host: LocalHost) -> None:
    from runner.vm.gc import collect_garbage
    from runner.hypervisor.connect import connect_host

    settings = Settings.resolve(host.cache_dir)
    libvirt = connect_host(settings.libvirt_uri)
    try:
        collect_garbage(libvirt, settings)
    finally:
        libvirt.close()


def _wait_listening(head: subprocess.Popen, port: int, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if head.poll() is not None:
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
            raise InfraError(f"the Ray head exited with {head.returncode}:\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise InfraError(f"the Ray head did not listen on port {port} in {timeout:.0f} s; see {log}")
