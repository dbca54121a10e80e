"""The one place cu-run talks to Ray itself: the token, connecting, and finding the cu-run hosts.

Every cluster is token-authenticated (Ray's RAY_AUTH_MODE=token): the same shared secret on
the head, every node and every client. Ray looks for it in RAY_AUTH_TOKEN, then in the file
RAY_AUTH_TOKEN_PATH names, then in ~/.ray/auth_token. A client without it is refused by the
cluster; cu-run says so before it tries, and names the fix.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner import __version__
from runner.errors import UsageError
from runner.owner import raise_on_termination

NAMESPACE = "cu-run"
HOST_PREFIX = "host:"  # a host actor is the named actor "host:<name>" in NAMESPACE
SLOTS_RESOURCE = "cu_run_slots"  # every cu-run node advertises its slots as this custom resource
INFO_TIMEOUT_S = 30.0
DEFAULT_TOKEN_FILE = Path.home() / ".ray" / "auth_token"
TOKEN_FIX = ("export RAY_AUTH_TOKEN_PATH=<the cluster's token file> (cu-run cluster local prints it; "
             "on a lab, copy the head's ~/.ray/auth_token to ~/.ray/auth_token on this machine)")


def require_ray() -> Any:
    # Before Ray is imported: it reads its auth mode once, when its core loads, and every
    # cu-run cluster is token-authenticated.
    os.environ["RAY_AUTH_MODE"] = "token"
    try:
        import ray
    except ImportError as exc:
        raise UsageError("the cluster commands need Ray, which is not installed",
                         fix="pip install 'cu-run[cluster]' (or: scripts/setup-host.sh --extras cluster)") from exc
    return ray


def node_resource(name: str) -> str:
    """The custom resource only host NAME's node has: it pins the host's actor to its machine."""
    return f"cu_run_node_{name}"


def token_source() -> str | None:
    """Where this process's Ray token comes from, or None when it has none."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        return path if Path(path).is_file() and Path(path).read_text().strip() else None
    return str(DEFAULT_TOKEN_FILE) if DEFAULT_TOKEN_FILE.is_file() else None


def require_token() -> None:
    if token_source() is None:
        path = os.environ.get("RAY_AUTH_TOKEN_PATH")
        where = f"RAY_AUTH_TOKEN_PATH names {path}, which is missing or empty" if path else \
            f"neither RAY_AUTH_TOKEN nor RAY_AUTH_TOKEN_PATH is set and {DEFAULT_TOKEN_FILE} does not exist"
        raise UsageError(f"no token for the Ray cluster: {where}; the cluster refuses clients without it",
                         fix=TOKEN_FIX)


def token_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a Ray process (node or client) of a token-authenticated cluster."""
    return {**os.environ, "RAY_AUTH_MODE": "token", "RAY_BACKEND_LOG_LEVEL": "error", **(extra or {})}


def check_address(address: str) -> tuple[str, int]:
    """ADDRESS as (host, port), once something answers there."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError(f"--cluster {address!r} is not a Ray address", fix="give the head's HOST:PORT, e.g. 10.0.0.5:6379")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except OSError as exc:
        raise UsageError(f"nothing answers at {address} ({exc.strerror or exc})",
                         fix="check the address, that the head runs (ray start --head), and that the firewall "
                             "lets this machine reach its port") from exc
    return host, int(port)


def connect(address: str) -> Any:
    """Joins the cluster at ADDRESS as a client; the ray module, connected. Bad input is
    refused before Ray waits on it: a malformed or dead address, no token."""
    check_address(address)
    require_token()
    ray = require_ray()
    if ray.is_initialized():
        return ray
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.ERROR,
                 configure_logging=False)
    except ConnectionError as exc:
        raise UsageError(f"the Ray cluster at {address} refused this client: the token ({token_source()}) "
                         "is not the cluster's, or the address is not a Ray head", fix=TOKEN_FIX) from exc
    # Ray's client takes SIGTERM for itself (it exits on the spot); cu-run's handler unwinds
    # instead, so what was started is stopped and removed.
    raise_on_termination()
    return ray


@dataclass
class HostLink:
    """The driver's handle on one cu-run host: its actor and what it said of itself."""

    name: str
    actor: Any
    info: dict


def find_hosts(ray: Any, address: str, *, check_version: bool = True) -> list[HostLink]:
    """Every cu-run host of the cluster that answers. Refuses a cluster without any, and hosts
    that run another cu-run version (their episodes would not be the driver's)."""
    names = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                   if a.get("namespace") == NAMESPACE and a["name"].startswith(HOST_PREFIX))
    links, silent = [], []
    for name in names:
        actor = ray.get_actor(name, namespace=NAMESPACE)
        try:
            info = ray.get(actor.info.remote(), timeout=INFO_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - a host that cannot answer is left out, and named
            silent.append(f"{name.removeprefix(HOST_PREFIX)} ({type(exc).__name__})")
            continue
        links.append(HostLink(name.removeprefix(HOST_PREFIX), actor, info))
    if silent:
        logging.getLogger(__name__).warning("hosts that did not answer are left out: %s", ", ".join(silent))
    if not links:
        raise UsageError(f"the Ray cluster at {address} has no cu-run hosts"
                         + (f" that answer (silent: {', '.join(silent)})" if silent else ""),
                         fix=f"run `cu-run host join {address}` on each lab machine")
    if check_version:
        wrong = [f"{h.name} runs {h.info.get('version')}" for h in links if h.info.get("version") != __version__]
        if wrong:
            raise UsageError(f"cu-run hosts run another version than this driver's {__version__}: {', '.join(wrong)}",
                             fix=f"install cu-run {__version__} on those machines and join them again")
    return links


def host_lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """The exceptions that mean a host (its actor, node or machine) is gone, not that its code failed."""
    exc = ray.exceptions
    return tuple(getattr(exc, n) for n in ("RayActorError", "ActorUnavailableError", "ObjectLostError",
                                           "OwnerDiedError", "NodeDiedError", "WorkerCrashedError")
                 if hasattr(exc, n))


def disconnect() -> None:
    try:
        import ray
    except ImportError:
        return
    if ray.is_initialized():
        ray.shutdown()
        raise_on_termination()  # the client's shutdown leaves SIGTERM at its default (exit on the spot)
