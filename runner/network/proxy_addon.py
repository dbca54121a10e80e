"""The recording proxy's rules, as a mitmproxy addon: `mitmdump -s proxy_addon.py`, started per
episode by runner/network/proxy.py in the proxy's own interpreter (mitmproxy's venv, where cu-run
is not installed: this file imports mitmproxy, the standard library and policy.py beside it).

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
    log        network.jsonl: one line per request, allowed or refused

Every refusal is an answer from the proxy itself (403, or 404 for a request a cassette lacks) and a
log line with the reason: the guest learns nothing of the host beyond it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

from mitmproxy import http
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

sys.path.insert(0, str(Path(__file__).parent))
from policy import Policy, Refused, request_refusal  # beside this file, in the proxy's interpreter

REFUSED_HEADER = "X-Cu-Run-Refused"
GUEST_URL = "cu_run_guest_url"
# What a response keeps in the cassette: the headers that describe the body travel with it;
# hop-by-hop and per-connection ones do not.
DROPPED_HEADERS = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "date"}


def cassette_key(method: str, url: str, body: bytes) -> str:
    return f"{method} {url} {hashlib.sha256(body).hexdigest()}"


class Rules:
    def __init__(self, config: dict) -> None:
        self.policy = Policy.of(config.get("allow", ()), {k: tuple(v) for k, v in config.get("mapped", {}).items()})
        self.plain = {n.lower() for n in config.get("plain", ())}
        self.background = {n.lower() for n in config.get("background", ())}
        self.mode = config.get("mode", "live")
        if self.mode not in ("live", "record", "replay"):
            raise ValueError(f"mode must be live, record or replay, not {self.mode!r}")
        self.cassette = Path(config["cassette"]) if config.get("cassette") else None
        self.log_path = Path(config["log"])
        self._lock = threading.Lock()
        self.replay: dict[str, dict] = {}
        if self.mode == "replay":
            if self.cassette is None:
                raise ValueError("replay needs a cassette")
            for line in self.cassette.read_text().splitlines():
                entry = json.loads(line)
                self.replay.setdefault(entry["key"], entry)  # the first answer recorded is the answer

    # -- hooks

    def http_connect(self, flow: http.HTTPFlow) -> None:
        why = self.policy.refusal(None, flow.request.host, flow.request.port)
        if why is not None:
            self._refuse(flow, 403, why)

    def request(self, flow: http.HTTPFlow) -> None:
        request = flow.request
        why = request_refusal(self.policy, request.scheme, request.host, request.port, request.headers.get("host"))
        if why is not None:
            self._refuse(flow, 403, why)
            return
        flow.metadata[GUEST_URL] = request.pretty_url  # as the guest asked: the cassette's key and the log's
        if self.mode == "replay":
            entry = self.replay.get(cassette_key(request.method, request.pretty_url, request.raw_content or b""))
            if entry is None:
                self._refuse(flow, 404, f"{request.method} {request.pretty_url} is not in the cassette", verdict="missed")
                return
            flow.response = http.Response.make(entry["status"], base64.b64decode(entry["body"]),
                                               [(k.encode(), v.encode()) for k, v in entry["headers"]])
        elif request.host.lower().rstrip(".") in self.plain:
            request.scheme = "http"

    def server_connect(self, data: ServerConnectionHookData) -> None:
        if self.mode == "replay":
            data.server.error = "replay answers from the cassette; it never connects"
            return
        host, port = data.server.address
        try:
            address = self.policy.connect_to(host, port)
        except Refused as exc:
            data.server.error = str(exc)
            self._log({"verdict": "refused", "url": f"{host}:{port}", "reason": str(exc)})
            return
        data.server.sni = data.server.sni or host  # the name stays the TLS name; the address is the one checked
        data.server.address = address

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.response is None or flow.response.headers.get(REFUSED_HEADER):
            return
        request, response = flow.request, flow.response
        url = flow.metadata.get(GUEST_URL, request.pretty_url)
        self._log({"verdict": "allowed" if self.mode != "replay" else "replayed", "method": request.method,
                   "url": url, "status": response.status_code, "bytes": len(response.raw_content or b"")})
        if self.mode == "record" and self.cassette is not None:
            entry = {"key": cassette_key(request.method, url, request.raw_content or b""),
                     "status": response.status_code,
                     "headers": [[k, v] for k, v in response.headers.items(multi=True) if k.lower() not in DROPPED_HEADERS],
                     "body": base64.b64encode(response.content or b"").decode("ascii")}
            with self._lock, self.cassette.open("a") as out:
                out.write(json.dumps(entry, sort_keys=True) + "\n")

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.error is not None:
            self._log({"verdict": "error", "url": flow.request.pretty_url, "reason": flow.error.msg})

    # -- what the guest is told, and the log

    def _refuse(self, flow: http.HTTPFlow, status: int, why: str, verdict: str = "refused") -> None:
        url = flow.request.pretty_url if flow.request.method != "CONNECT" else f"{flow.request.host}:{flow.request.port}"
        if verdict == "refused" and flow.request.host.lower().rstrip(".") in self.background:
            verdict = "background"
        self._log({"verdict": verdict, "method": flow.request.method, "url": url, "reason": why})
        flow.response = http.Response.make(status, f"cu-run: refused: {why}\n".encode(),
                                           {"Content-Type": "text/plain", REFUSED_HEADER: verdict})

    def _log(self, entry: dict) -> None:
        # t: the wall clock, for a person (at a frozen clock, the task's instant on); mono: the
        # host's monotonic clock, which libfaketime leaves real and every process shares: what the
        # runner judges the agent's time by.
        line = json.dumps({"t": round(time.time(), 3), "mono": round(time.monotonic(), 3), **entry}, sort_keys=True)
        with self._lock, self.log_path.open("a") as out:
            out.write(line + "\n")


addons = [Rules(json.loads(Path(os.environ["CU_RUN_PROXY_CONFIG"]).read_text()))]
