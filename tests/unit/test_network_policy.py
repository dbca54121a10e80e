"""Where a guest's request may go: allowed origins by name, mapped names, and no address that is
not public, however it is written or resolved."""

import ast
from pathlib import Path

import pytest

from runner.network.policy import (Origin, Policy, Refused, Unreachable, normalized_name, public, request_refusal,
                                   system_resolver)

POLICY = Policy.of(["https://example.com", "http://plain.example.org:8080", "https://*.cdn.example.net",
                    "http://service.test"],
                   mapped={"service.test": ("127.0.0.1", 5000)})


def resolver(table):
    return lambda host, port: table[host]


@pytest.mark.parametrize("scheme, host, port", [
    ("https", "example.com", 443), ("https", "EXAMPLE.com.", 443), (None, "example.com", 443),
    ("http", "plain.example.org", 8080), ("https", "a.cdn.example.net", 443), ("https", "b.a.cdn.example.net", 443),
    ("http", "service.test", 80),
])
def test_an_allowed_origin_or_a_mapped_name_is_let_through(scheme, host, port):
    assert POLICY.refusal(scheme, host, port) is None


@pytest.mark.parametrize("scheme, host, port, why", [
    ("http", "example.com", 80, "outside the allowed origins"),  # the scheme and port are the origin's
    ("https", "example.com", 8443, "outside the allowed origins"),
    ("https", "evil-example.com", 443, "outside"),
    ("https", "example.com.evil.org", 443, "outside"),
    ("https", "cdn.example.net", 443, "outside"),  # *.cdn... is the names under it
    ("https", "evilcdn.example.net", 443, "outside"),
    ("https", "127.0.0.1", 443, "an address, not a name"),
    ("https", "127.1", 443, "an address"),
    ("https", "0x7f.1", 443, "an address"),
    ("https", "2130706433", 443, "an address"),
    ("https", "017700000001", 443, "an address"),
    ("https", "[::1]", 443, "an address"),
    ("https", "::ffff:127.0.0.1", 443, "an address"),
    ("https", "exa mple.com", 443, "not a valid name"),
    ("https", "a" * 64 + ".com", 443, "not a valid name"),
    ("https", "service.test", 443, "outside"),  # a mapped name is allowed at its origin only
])
def test_anything_else_is_refused_with_its_reason(scheme, host, port, why):
    assert why in POLICY.refusal(scheme, host, port)


def test_a_name_that_resolves_to_an_address_that_is_not_public_is_refused():
    for inner in ("127.0.0.1", "10.1.2.3", "192.168.0.1", "172.16.5.5", "169.254.169.254", "100.64.0.1", "0.0.0.0",
                  "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "2002:7f00:1::", "64:ff9b::7f00:1", "224.0.0.1"):
        with pytest.raises(Refused, match="not a public address"):
            POLICY.connect_to("example.com", 443, resolver({"example.com": ["93.184.215.14", inner]}))
    assert POLICY.connect_to("example.com", 443, resolver({"example.com": ["93.184.215.14"]})) == ("93.184.215.14", 443)


def test_an_allowed_name_that_does_not_resolve_is_unreachable_not_refused():
    """A site that is down is no refusal: the proxy counts it, and it is not the agent's violation."""
    with pytest.raises(Unreachable, match="resolves to no address"):
        POLICY.connect_to("example.com", 443, resolver({"example.com": []}))
    with pytest.raises(Unreachable, match="does not resolve"):
        system_resolver("nowhere.invalid", 443)  # .invalid never resolves (RFC 6761)
    assert not issubclass(Unreachable, Refused)


def test_a_mapped_name_goes_where_the_runner_mapped_it_without_a_lookup():
    def no_lookup(host, port):
        raise AssertionError("a mapped name is never resolved")

    assert POLICY.connect_to("Service.Test", 80, no_lookup) == ("127.0.0.1", 5000)


def test_localhost_is_a_name_that_resolves_to_loopback_and_is_refused():
    policy = Policy.of(["http://localhost"])
    assert policy.refusal("http", "localhost", 80) is None  # allowed by name...
    with pytest.raises(Refused, match="127.0.0.1"):
        policy.connect_to("localhost", 80)  # ...but where it leads is not


def test_a_host_header_that_names_another_host_is_refused():
    assert request_refusal(POLICY, "https", "example.com", 443, "example.com") is None
    assert request_refusal(POLICY, "https", "example.com", 443, "EXAMPLE.COM:443") is None
    assert "'127.0.0.1' is an address" in request_refusal(POLICY, "https", "example.com", 443, "127.0.0.1")
    assert "names 'service.test'" in request_refusal(POLICY, "https", "example.com", 443, "service.test")


def test_origins_parse_and_refuse_what_is_not_one():
    assert str(Origin.parse("https://Example.COM/")) == "https://example.com"
    assert Origin.parse("http://example.com:8080").port == 8080
    for bad in ("ftp://example.com", "https://example.com/path", "example.com", "https://user@example.com",
                "https://127.0.0.1"):
        with pytest.raises((ValueError, Refused)):
            Origin.parse(bad)
    assert normalized_name("bücher.example") == "xn--bcher-kva.example"
    assert public("93.184.215.14") and not public("127.0.0.1")


def test_the_policy_imports_the_standard_library_only():
    """The proxy loads it in mitmproxy's own interpreter, where cu-run is not installed."""
    tree = ast.parse((Path(__file__).parents[2] / "runner" / "network" / "policy.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "ipaddress", "socket", "collections", "dataclasses", "urllib"}
