"""What every networked episode of a run shares: the proxy's mode (--net), where its cassettes
are kept (--assets), and where its allowed names lead while it connects (--net-hosts).

A hosts file sends allowed names somewhere other than where the internet's DNS would: a lab's
mirror of a site, or the loopback stand-ins a test records against. It is the operator's, never
the guest's, so it may lead to loopback; it changes where an allowed name goes, never what is
allowed. A replay connects to nothing, so it takes none.

    # net-hosts.yaml
    hosts:
      blog.example.org: 127.0.0.1:8443
    ca: stand-ins-ca.pem   # optional: the CA their certificates are signed by (beside this file)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from runner.choices import NetMode
from runner.errors import UsageError
from runner.network.policy import Refused, normalized_name


@dataclass(frozen=True)
class NetHosts:
    hosts: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (address, port)
    ca: Path | None = None  # trusted for these servers' TLS, beside the system's CAs
    source: Path | None = None

    @classmethod
    def load(cls, path: Path) -> NetHosts:
        """PATH's hosts, each checked; a UsageError names the first line that is wrong."""
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--net-hosts {path}: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("hosts"), dict) or set(data) - {"hosts", "ca"}:
            raise UsageError(f"--net-hosts {path}: expected hosts: {{name: address:port}} and an optional ca:")
        hosts = {}
        for name, target in data["hosts"].items():
            address, _, port = str(target).rpartition(":")
            try:
                hosts[normalized_name(str(name))] = (address.strip("[]"), int(port))
            except (Refused, ValueError):
                raise UsageError(f"--net-hosts {path}: {name}: {target!r} is not name -> address:port") from None
            if not address or not 0 < int(port) < 65536:
                raise UsageError(f"--net-hosts {path}: {name}: {target!r} is not name -> address:port")
        ca = (path.parent / str(data["ca"])).resolve() if data.get("ca") else None
        if ca is not None and not ca.is_file():
            raise UsageError(f"--net-hosts {path}: its ca {ca} is not a file")
        return cls(hosts, ca, path.resolve())

    def record(self) -> dict:
        """run.json's account of it: a recording made against stand-ins says so."""
        return {"file": str(self.source), "hosts": {n: f"{a}:{p}" for n, (a, p) in sorted(self.hosts.items())},
                "ca": str(self.ca) if self.ca else None}


@dataclass(frozen=True)
class NetSettings:
    mode: NetMode = NetMode.live
    assets: Path | None = None  # the asset store a task's sha256: cassette is kept in
    hosts: NetHosts | None = None

    def __post_init__(self) -> None:
        if self.hosts is not None and self.mode == NetMode.replay:
            raise UsageError("--net-hosts says where a live or recording proxy connects; a replay connects to nothing",
                             fix="drop --net-hosts, or use --net record")
