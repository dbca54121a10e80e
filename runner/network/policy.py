"""Where a guest's request may go: the task's allowed origins, the names the runner itself maps
(a task's services, a test's stand-ins), and the addresses no request may reach however it names
them.

The proxy (runner/network/proxy_addon.py) imports this file in its own interpreter, so it uses
the standard library only.

A request is judged twice:
- by its target (`Policy.refusal`): the scheme, name and port it asks for must be an allowed
  origin's, or a mapped name's; an address written as a number is never a name, in any of the
  forms the C library reads (127.1, 0x7f.1, 2130706433, [::1]);
- by where its name leads (`Policy.connect_to`): a mapped name goes where the runner mapped it;
  any other name is resolved here, refused when any of its addresses is not a public one
  (loopback, private, link-local, shared, multicast, reserved, an IPv4 address inside IPv6), and
  the connection is pinned to the address checked, so a second lookup cannot lead elsewhere. A
  name that does not resolve is not refused but unreachable: an allowed site that is down.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_NAME = 253

Resolver = Callable[[str, int], list[str]]


class Refused(Exception):
    """A request the policy refuses; the message says why, for the log and the violation."""


class Unreachable(Exception):
    """An allowed name that leads nowhere (it does not resolve): the site is down, which is no
    refusal and not the agent's doing. The message says why, for the log."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str  # a normalized name; "*.example.com" allows every name under example.com
    port: int

    @classmethod
    def parse(cls, text: str) -> Origin:
        """"https://example.com", "http://example.com:8080", "https://*.example.com"."""
        parts = urlsplit(text.strip())
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") \
                or parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"{text!r} is not an origin: scheme://name[:port], the scheme http or https")
        wildcard = parts.hostname.startswith("*.")
        host = normalized_name(parts.hostname[2:] if wildcard else parts.hostname)
        return cls(parts.scheme, ("*." if wildcard else "") + host, parts.port or DEFAULT_PORTS[parts.scheme])

    def allows(self, scheme: str | None, host: str, port: int) -> bool:
        if (scheme is not None and scheme != self.scheme) or port != self.port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def __str__(self) -> str:
        default = DEFAULT_PORTS[self.scheme] == self.port
        return f"{self.scheme}://{self.host}{'' if default else f':{self.port}'}"


def normalized_name(host: str) -> str:
    """HOST as the policy compares names: lower case, one trailing dot dropped, international
    names in their ASCII form. An address written as a number raises Refused: it is no name."""
    name = host.strip().lower()
    if name.startswith("[") or ":" in name or numeric_address(name.rstrip(".")):
        raise Refused(f"{host!r} is an address, not a name: only names may be allowed or asked for")
    name = name[:-1] if name.endswith(".") else name
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError as exc:
        raise Refused(f"{host!r} is not a valid name") from exc
    labels = name.split(".")
    if not name or len(name) > MAX_NAME or any(not label or len(label) > 63 for label in labels) \
            or any(not all(c.isalnum() or c == "-" for c in label) for label in labels):
        raise Refused(f"{host!r} is not a valid name")
    return name


def numeric_address(name: str) -> bool:
    """Whether NAME is an IPv4 address in any form the C library accepts (inet_aton: 127.1,
    0x7f000001, 017700000001, 2130706433), or an IPv6 one."""
    try:
        socket.inet_aton(name)
        return True
    except OSError:
        pass
    try:
        ipaddress.ip_address(name.strip("[]"))
        return True
    except ValueError:
        return False


def public(address: str) -> bool:
    """Whether ADDRESS may be connected to on the guest's behalf: a global unicast address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None or ip.sixtofour is not None or ip.teredo is not None:
            return False  # an IPv4 address inside IPv6 would reach what its IPv4 form may not
        if ip in ipaddress.ip_network("64:ff9b::/96"):
            return False
    return ip.is_global and not ip.is_multicast


def system_resolver(host: str, port: int) -> list[str]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise Unreachable(f"{host} does not resolve: {exc.strerror}") from exc
    return [str(info[4][0]) for info in found]


@dataclass(frozen=True)
class Policy:
    allow: tuple[Origin, ...] = ()
    # A name the runner maps itself -> (address, port) it connects to: a task's service, a test's
    # stand-in. Loopback is fine here; the guest cannot add to this table. A mapping says where a
    # name leads, not that it is allowed: its origin is in ALLOW too.
    mapped: dict[str, tuple[str, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, allow: Iterable[str], mapped: dict[str, tuple[str, int]] | None = None) -> Policy:
        return cls(tuple(Origin.parse(o) for o in allow),
                   {normalized_name(name): (address, int(port)) for name, (address, port) in (mapped or {}).items()})

    def refusal(self, scheme: str | None, host: str, port: int) -> str | None:
        """Why a request for SCHEME://HOST:PORT is refused (None: it is allowed). SCHEME is None for
        a CONNECT, which names no scheme."""
        try:
            name = normalized_name(host)
        except Refused as exc:
            return str(exc)
        if any(o.allows(scheme, name, port) for o in self.allow):
            return None
        asked = f"{scheme + '://' if scheme else ''}{name}:{port}"
        return f"{asked} is outside the allowed origins ({', '.join(map(str, self.allow)) or 'none'})"

    def connect_to(self, host: str, port: int, resolve: Resolver = system_resolver) -> tuple[str, int]:
        """The address to connect to for HOST:PORT, already judged allowed by `refusal`: a mapped
        name's, or the first of HOST's addresses when every one of them is public. Raises Refused,
        or Unreachable when HOST resolves to nothing."""
        name = normalized_name(host)
        if name in self.mapped:
            return self.mapped[name]
        addresses = resolve(name, port)
        if not addresses:
            raise Unreachable(f"{name} resolves to no address")
        inner = sorted({a for a in addresses if not public(a)})
        if inner:
            raise Refused(f"{name} resolves to {', '.join(inner)}, which is not a public address")
        return addresses[0], port


def request_refusal(policy: Policy, scheme: str, host: str, port: int, host_header: str | None) -> str | None:
    """Why a request is refused: its target (`Policy.refusal`), or a Host header that names another
    name than the one the connection was opened for (a proxy that trusted it could be steered)."""
    why = policy.refusal(scheme, host, port)
    if why is not None or host_header is None:
        return why
    named = host_header.strip()
    named_host = urlsplit(f"//{named}").hostname or ""
    try:
        if normalized_name(named_host) != normalized_name(host):
            return f"the Host header names {named!r}, the request goes to {host}"
    except Refused as exc:
        return f"the Host header: {exc}"
    return None
