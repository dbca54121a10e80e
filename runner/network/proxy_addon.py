"""The recording proxy's rules, as a mitmproxy addon: `mitmdump -s proxy_addon.py`, started per
episode by runner/network/proxy.py in the proxy's own interpreter (mitmproxy's venv, where cu-run
is not installed: this file imports mitmproxy, the standard library, and policy.py and
proxy_log.py beside it).

Its configuration is the JSON file CU_RUN_PROXY_CONFIG names:
    allow      the allowed origins ("https://example.com")
    mapped     {name: [address, port]}: names the runner maps (services, stand-ins)
    plain      mapped names whose server speaks plain HTTP: the guest may use https:// (the proxy's
               certificate), and the proxy goes on in plain HTTP (a task's folder service)
    mode       "live" (connect to allowed origins), "record" (live, and write the cassette), or
               "replay" (answer from the cassette alone; never connect)
    cassette   the cassette's path (JSON lines), read in replay, written in record
    background names the guest's own apps ask for unbidden (a browser's sign-in check): refused
               like any other, logged "background", which is not a violation
    log        network.jsonl (proxy_log.py): one line per request, forwarded or not
    clock      a task's frozen clock, as a Unix time, or null: the certificates made for the guest
               and the log's wall times are dated at the guest's time (guest_clock.py); the
               proxy's own checks of the sites it reaches use the real time

Every request the proxy does not forward is a line, whichever hook learns of it, with a `stage`
and a `reason`. Its verdict is `refused` (the agent's: a violation in its time) when the proxy
refused what the guest sent or where it asked to go:
    connect   a CONNECT outside the allowed origins: to an address or a port other than 443,
              answered 403; to a name on 443, written as it comes, then let through and never
              connected (Rules.reads_inside), so that each request in it is refused at `request`
              with its whole URL: its lines carry the tunnel's id (`tunnel`), and one of them in
              the agent's time stands for the CONNECT's among the violations
    request   a request outside them, or a Host header naming another host
    address   an allowed name that leads to an address that is not public
    read      what mitmproxy refused before any rule saw a request: a body over the size limit, a
              malformed or smuggling request (Content-Length with Transfer-Encoding), a head it
              could not read or that never ended
    tls       a TLS handshake the guest's client gave up, when its name (SNI) is outside the origins
and `error` (counted, not the agent's) when a request to an allowed host failed otherwise: let go
by the rules, its site was down or answered badly (`upstream`); its body was cut off by the guest
closing the connection (`read`); the guest's client did not finish a TLS handshake (`tls`); or the
proxy itself failed (`proxy`). `background` and `missed` are as above.

Every refusal is an answer from the proxy itself (403, 404 for a request a cassette lacks, 400,
413, or the connection closed) and a log line with the reason: the guest learns nothing of the
host beyond it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import sys
import threading
import time
from pathlib import Path

from mitmproxy import connection, http, tcp, tls
from mitmproxy.proxy import layer
from mitmproxy.proxy.server_hooks import ServerConnectionHookData
from mitmproxy.utils import human

sys.path.insert(0, str(Path(__file__).parent))
# Beside this file, in the proxy's interpreter.
from guest_clock import date_certificates_at
from policy import Policy, Refused, Unreachable, normalized_name, request_refusal
from proxy_log import TUNNEL, BoundedLog

REFUSED_HEADER = "X-Cu-Run-Refused"
GUEST_URL = "cu_run_guest_url"  # in a flow's metadata once the rules let it go
LOGGED = "cu_run_logged"  # in a flow's metadata once its line is written: one line a flow
# What a response keeps in the cassette: the headers that describe the body travel with it;
# hop-by-hop and per-connection ones do not.
DROPPED_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "date"}
# mitmproxy's log of each client connection, and its words there for bytes that made no request
# (proxy/layers/http/_http1.py): "PEER: why", or this.
MITMPROXY_LOG = "mitmproxy.proxy.server"
HEAD_UNFINISHED = "Client closed connection before completing request headers"
CUT_OFF = "peer closed connection without sending complete message body"  # h11's, in mitmproxy's error
FIRST_BYTES = 200  # of a connection's first bytes, kept for a line when nothing else is known


def cassette_key(method: str, url: str, body: bytes) -> str:
    return f"{method} {url} {hashlib.sha256(body).hexdigest()}"


class Guest:
    """What the rules know of one of the guest's connections to the proxy. (Not a dataclass:
    mitmproxy runs this file as a script, outside sys.modules, where dataclasses cannot look.)"""

    def __init__(self) -> None:
        self.tunnel = ""  # the CONNECT target let through on it, "host:port"
        self.first_bytes = b""  # what it sent first
        self.seen = False  # whether mitmproxy made a request of what it sent (or a line was written for it)
        self.leads_nowhere: dict[tuple[str, int], str] = {}  # (host, port) it asked for: why refused
        # A refused CONNECT let through only to read what it carries (Rules.reads_inside): its
        # (host, port, why). Once set it stays: all else on the connection is refused with it.
        self.refused_tunnel: tuple[str, int, str] | None = None
        self.tunnel_id = ""  # its client connection's id, in each line written for it (TUNNEL)


class Rules:
    def __init__(self, config: dict) -> None:
        self.policy = Policy.of(config.get("allow", ()), {k: tuple(v) for k, v in config.get("mapped", {}).items()})
        self.plain = {n.lower() for n in config.get("plain", ())}
        self.background = {n.lower() for n in config.get("background", ())}
        self.mode = config.get("mode", "live")
        if self.mode not in ("live", "record", "replay"):
            raise ValueError(f"mode must be live, record or replay, not {self.mode!r}")
        self.cassette = Path(config["cassette"]) if config.get("cassette") else None
        # The guest's clock runs from the frozen instant, set as the episode begins: near enough now.
        offset = float(config["clock"]) - time.time() if config.get("clock") is not None else 0.0
        if offset:
            date_certificates_at(offset)
        self.log = BoundedLog(Path(config["log"]), wall_offset_s=offset)
        self._cassette_lock = threading.Lock()
        self.guests: dict[tuple, Guest] = {}  # by the connection's peer address, which mitmproxy's log records carry
        self.replay: dict[str, dict] = {}
        if self.mode == "replay":
            if self.cassette is None:
                raise ValueError("replay needs a cassette")
            for line in self.cassette.read_text().splitlines():
                entry = json.loads(line)
                self.replay.setdefault(entry["key"], entry)  # the first answer recorded is the answer
        # A request head mitmproxy cannot read makes no flow and calls no hook: it only says so.
        logging.getLogger(MITMPROXY_LOG).addFilter(self.mitmproxy_said)

    def done(self) -> None:
        logging.getLogger(MITMPROXY_LOG).removeFilter(self.mitmproxy_said)  # a reloaded script adds its own

    # -- hooks: the guest's connections

    def client_connected(self, client: connection.Client) -> None:
        self.guests[client.peername] = Guest()

    def next_layer(self, nextlayer: layer.NextLayer) -> None:
        guest = self.guests.get(nextlayer.context.client.peername)
        if guest is not None and not guest.first_bytes:
            guest.first_bytes = nextlayer.data_client()[:FIRST_BYTES]

    def client_disconnected(self, client: connection.Client) -> None:
        guest = self.guests.pop(client.peername, None)
        if guest is None:
            return
        for (host, port), why in guest.leads_nowhere.items():  # its flow said nothing more
            self.log.write({"verdict": "refused", "stage": "address", "url": f"{host}:{port}", "reason": why})
        if guest.first_bytes and not guest.seen:
            # Bytes that made no request, and that mitmproxy answered without a word (a request
            # naming no host at all): not forwarded all the same.
            self._guest_line(guest, {"verdict": "refused", "stage": "read", "url": guest.tunnel,
                                     "reason": f"the proxy made no request of what the guest sent: {guest.first_bytes!r}"})

    def mitmproxy_said(self, record: logging.LogRecord) -> bool:
        """A logging filter on mitmproxy's connection log: what it says of a guest connection's bytes
        that made no request becomes a line (and the record goes on as it would)."""
        peer = getattr(record, "client", None)
        guest = self.guests.get(peer) if isinstance(peer, tuple) else None
        if guest is None:
            return True
        message = record.getMessage()
        if message.startswith((f"{human.format_address(peer)}: ", HEAD_UNFINISHED)):
            guest.seen = True
            self._guest_line(guest, {"verdict": "refused", "stage": "read", "url": guest.tunnel, "reason": message})
        elif record.levelno >= logging.ERROR:
            guest.seen = True
            self._guest_line(guest, {"verdict": "error", "stage": "proxy", "url": guest.tunnel, "reason": message})
        return True

    # -- hooks: HTTP

    def http_connect(self, flow: http.HTTPFlow) -> None:
        self._seen(flow)
        host, port = flow.request.host, flow.request.port
        why = self.policy.refusal(None, host, port)
        guest = self.guests.get(flow.client_conn.peername)
        if why is not None and guest is not None and self.reads_inside(host, port):
            # Refused and written now, in the agent's time whenever the connection ends; then
            # answered 200 and never connected (connection_strategy lazy; request and
            # server_connect refuse all in it), so that each request in it is a line naming its
            # page, which stands for this one among the violations (TUNNEL: runner.runs.episode_network).
            guest.tunnel, guest.refused_tunnel, guest.tunnel_id = f"{host}:{port}", (host, port, why), flow.client_conn.id
            self._write(flow, self._refused(host, why), "connect", why)
            return
        if why is not None:
            self._refuse(flow, 403, why, "connect")
            return
        if guest is not None:
            guest.tunnel = f"{host}:{port}"

    def reads_inside(self, host: str, port: int) -> bool:
        """Whether a refused CONNECT is let through to read the request inside, so that its line
        says which page: to a name (an address is refused at once) on HTTPS's port, not one of
        the apps' background names. The CONNECT's own line is written all the same: a client
        that asks nothing in it, or does not trust the episode's CA, is refused by it."""
        try:
            name = normalized_name(host)
        except Refused:
            return False
        return port == 443 and name not in self.background

    def http_connect_error(self, flow: http.HTTPFlow) -> None:
        if not flow.metadata.get(LOGGED):  # the rules' own 403 is written already
            status = flow.response.status_code if flow.response else None
            self._write(flow, "refused", "connect", flow.error.msg if flow.error else f"the proxy answered {status}")

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        self._seen(flow)

    def request(self, flow: http.HTTPFlow) -> None:
        self._seen(flow)
        request = flow.request
        guest = self.guests.get(flow.client_conn.peername)
        if guest is not None and guest.refused_tunnel is not None:
            # Whatever it asks in a refused tunnel is refused, under the tunnel's name whatever
            # its Host header says.
            tunnel_why = guest.refused_tunnel[2]
            self._refuse(flow, 403, tunnel_why, "request")
            return
        why = self._refusal(flow)
        if why is not None:
            self._refuse(flow, 403, why, "request")
            return
        flow.metadata[GUEST_URL] = request.pretty_url  # as the guest asked: the cassette's key and the log's
        if self.mode == "replay":
            entry = self.replay.get(cassette_key(request.method, request.pretty_url, request.raw_content or b""))
            if entry is None:
                self._refuse(flow, 404, f"{request.method} {request.pretty_url} is not in the cassette", "cassette",
                             verdict="missed")
                return
            flow.response = http.Response.make(entry["status"], base64.b64decode(entry["body"]),
                                               [(k.encode(), v.encode()) for k, v in entry["headers"]])
        elif request.host.lower().rstrip(".") in self.plain:
            request.scheme = "http"

    def server_connect(self, data: ServerConnectionHookData) -> None:
        if self.mode == "replay":
            data.server.error = "replay answers from the cassette; it never connects"
            return
        guest = self.guests.get(data.client.peername)
        if guest is not None and guest.refused_tunnel is not None:  # defence in depth: request refused it
            data.server.error = guest.refused_tunnel[2]
            return
        host, port = data.server.address
        try:
            address = self.policy.connect_to(host, port)
        except Unreachable as exc:
            data.server.error = str(exc)  # an allowed site that is down: its flow's line says so
            return
        except Refused as exc:
            data.server.error = str(exc)
            guest = self.guests.get(data.client.peername)
            if guest is None:
                self.log.write({"verdict": "refused", "stage": "address", "url": f"{host}:{port}", "reason": str(exc)})
            else:
                guest.leads_nowhere[(host, port)] = str(exc)  # its flow's line, with the whole URL
            return
        data.server.sni = data.server.sni or host  # the name stays the TLS name; the address is the one checked
        data.server.address = address

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.response is None or flow.metadata.get(LOGGED):
            return
        request, response = flow.request, flow.response
        url = flow.metadata.get(GUEST_URL, request.pretty_url)
        self._write(flow, "allowed" if self.mode != "replay" else "replayed", None, None,
                    status=response.status_code, bytes=len(response.raw_content or b""))
        if self.mode == "record" and self.cassette is not None:
            entry = {"key": cassette_key(request.method, url, request.raw_content or b""),
                     "status": response.status_code,
                     "headers": [[k, v] for k, v in response.headers.items(multi=True) if k.lower() not in DROPPED_HEADERS],
                     "body": base64.b64encode(response.content or b"").decode("ascii")}
            with self._cassette_lock, self.cassette.open("a") as out:
                out.write(json.dumps(entry, sort_keys=True) + "\n")

    def error(self, flow: http.HTTPFlow) -> None:
        """A flow that ended without a response: refused before the rules saw it, refused by where
        it leads, or let go by the rules and failed (its site down, the guest gone)."""
        if flow.metadata.get(LOGGED):
            return
        request = flow.request
        message = flow.error.msg if flow.error else "the request failed"
        guest = self.guests.get(flow.client_conn.peername)
        leads = guest.leads_nowhere.pop((request.host, request.port), None) if guest is not None else None
        if leads is not None:
            self._write(flow, "refused", "address", leads)
        elif GUEST_URL in flow.metadata:
            self._write(flow, "error", "upstream", message)
        else:
            why = self._refusal(flow)
            # The guest closing its connection mid-body (an upload cancelled, its process stopped)
            # is no refusal; a request refused as sent is, and so is anything to a host not allowed.
            verdict = "error" if CUT_OFF in message and why is None else self._refused(request.host, why)
            self._write(flow, verdict, "read", _and(message, why))

    # -- hooks: TLS and TCP in a tunnel

    def tls_failed_client(self, data: tls.TlsData) -> None:
        """The guest's client gave up the TLS handshake in a tunnel: nothing was asked yet. The
        agent's only when the name it gave (SNI) is outside the origins."""
        host, port = data.context.server.address or ("", 0)
        name = data.conn.sni or host
        guest = self.guests.get(data.context.client.peername)
        if guest is not None and guest.refused_tunnel is not None:
            name, port, _ = guest.refused_tunnel  # whatever name it gave: the tunnel's refusal is written
        why = self.policy.refusal(None, name, port)
        reason = _and(f"TLS: {data.conn.error or 'the handshake failed'}", why)
        self._guest_line(guest, {"verdict": self._refused(name, why) if why else "error", "stage": "tls",
                                 "url": f"{name}:{port}", "reason": reason})

    def tcp_error(self, flow: tcp.TCPFlow) -> None:
        # The proxy forwards HTTP only (rawtcp is off), so a TCP flow is a defence in depth.
        host, port = flow.server_conn.address or ("", 0)
        guest = self.guests.get(flow.client_conn.peername)
        leads = guest.leads_nowhere.pop((host, port), None) if guest is not None else None
        self.log.write({"verdict": "refused" if leads else "error", "stage": "address" if leads else "upstream",
                        "url": f"tcp://{host}:{port}", "reason": leads or (flow.error.msg if flow.error else "")})

    # -- what the guest is told, and the log

    def _refuse(self, flow: http.HTTPFlow, status: int, why: str, stage: str, verdict: str = "refused") -> None:
        if verdict == "refused":
            verdict = self._refused(flow.request.host, why)
        self._write(flow, verdict, stage, why)
        flow.response = http.Response.make(status, f"cu-run: refused: {why}\n".encode(),
                                           {"Content-Type": "text/plain", REFUSED_HEADER: verdict})

    def _refusal(self, flow: http.HTTPFlow) -> str | None:
        """Why the rules would refuse FLOW's request (None: they would let it go)."""
        request = flow.request
        if request.method == "CONNECT":
            return self.policy.refusal(None, request.host, request.port)
        return request_refusal(self.policy, request.scheme, request.host, request.port, request.headers.get("host"))

    def _refused(self, host: str, why: str | None) -> str:
        """A refusal's verdict: `background` for a name the guest's apps ask for unbidden, which
        the rules refuse; else `refused`."""
        return "background" if why and host.lower().rstrip(".") in self.background else "refused"

    def _seen(self, flow: http.HTTPFlow) -> None:
        guest = self.guests.get(flow.client_conn.peername)
        if guest is not None:
            guest.seen = True

    def _write(self, flow: http.HTTPFlow, verdict: str, stage: str | None, reason: str | None, **more: object) -> None:
        request = flow.request
        url = f"{request.host}:{request.port}" if request.method == "CONNECT" \
            else flow.metadata.get(GUEST_URL) or request.pretty_url
        entry = {"verdict": verdict, "method": request.method, "url": url, **more}
        if stage is not None:
            entry |= {"stage": stage, "reason": reason or ""}
        guest = self.guests.get(flow.client_conn.peername)
        if guest is not None and guest.refused_tunnel is not None and request.method != "CONNECT":
            # In a refused tunnel: the tunnel's name, whatever Host the request claims.
            host, port, _ = guest.refused_tunnel
            path = request.path if request.path.startswith("/") else "/" + request.path
            entry["url"] = f"https://{host}{'' if port == 443 else f':{port}'}{path}"
        flow.metadata[LOGGED] = True
        self._seen(flow)
        self._guest_line(guest, entry)

    def _guest_line(self, guest: Guest | None, entry: dict) -> None:
        """ENTRY, a line for one of GUEST's connections: in a refused tunnel, marked with it, so
        that it stands for the CONNECT's line among the violations (runner.runs.episode_network)."""
        if guest is not None and guest.tunnel_id:
            entry[TUNNEL] = guest.tunnel_id
        self.log.write(entry)


def _and(message: str, why: str | None) -> str:
    return f"{message.rstrip('.')}; and {why}" if why else message


addons = [Rules(json.loads(Path(os.environ["CU_RUN_PROXY_CONFIG"]).read_text()))]
