"""A task's network: block, read and refused as task.yaml's other fields are; what an episode
reports of it; and the guest's start script."""

from __future__ import annotations

import base64
import re
import subprocess
from types import SimpleNamespace

import pytest

from runner.errors import UsageError
from runner.network.proxy import CA_CERT_FILE, make_run_ca
from runner.profiles.base import DesktopUser
from runner.profiles.linux import LinuxProfile
from runner.runs.episode_network import FORWARDER, EpisodeNetwork
from runner.tasks.model import load_suite

BASE = "id: t\ninstruction: x\nprofile: linux\n"


def suite_with(tmp_path, yaml):
    folder = tmp_path / "t"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(BASE + yaml)
    for name in ("verify.sh", "oracle.sh"):
        (folder / name).write_text("verdict pass\n")
    return load_suite(str(tmp_path))


def test_a_network_block_gives_the_allowed_origins_and_each_services_own(tmp_path):
    (task,) = suite_with(tmp_path, "network:\n  allow: [https://example.com]\n"
                                   "  services: [{name: Site.Test, serve: site}]\n").tasks
    assert task.spec.network.origins() == ("https://example.com", "http://site.test", "https://site.test")
    (plain,) = suite_with(tmp_path / "other", "").tasks
    assert plain.spec.network is None, "no block, no network"


@pytest.mark.parametrize("yaml, message", [
    ("network:\n  allow: [example.com]\n", "not an origin"),
    ("network:\n  allow: ['https://127.0.0.1']\n", "an address, not a name"),
    ("network:\n  services: [{name: site.test, serve: ../elsewhere}]\n", "inside the task's folder"),
    ("network:\n  services: [{name: site.test, serve: /etc}]\n", "inside the task's folder"),
    ("network:\n  services: [{name: '10.0.0.1', serve: site}]\n", "an address"),
    ("network:\n  replay: ../x.jsonl\n", "inside the task"),
    ("network:\n  cassettes: x\n", "cassettes"),  # a field that is none: refused, not ignored
])
def test_a_bad_network_block_is_refused_naming_the_field(tmp_path, yaml, message):
    with pytest.raises(UsageError, match=message) as raised:
        suite_with(tmp_path, yaml)
    assert "field 'network" in raised.value.message


def test_the_agents_refused_requests_are_its_violations_and_others_are_not(tmp_path):
    # t is a frozen clock's wall time here, far from the window: mono is what is judged.
    log = [{"t": 1e9, "mono": 5.0, "verdict": "refused", "url": "http://early.test/", "reason": "setup's"},
           {"t": 1e9, "mono": 15.0, "verdict": "refused", "url": "http://evil.test/" + "x" * 1000, "reason": "outside"},
           {"t": 1e9, "mono": 16.0, "verdict": "allowed", "url": "http://site.test/"},
           {"t": 1e9, "mono": 25.0, "verdict": "refused", "url": "http://late.test/", "reason": "verifier's"}]
    network = EpisodeNetwork(SimpleNamespace(entries=lambda: log))
    (violation,) = network.violations(10.0, 20.0)
    assert violation.rule == "network" and violation.detail.startswith("outside the allowed origins: http://evil.test/")
    assert len(violation.detail) < 700


def test_the_linux_guest_start_script_is_sh_and_carries_the_certificate_never_the_key(tmp_path):
    make_run_ca(tmp_path / "ca")
    script = LinuxProfile().network_start_script(FORWARDER.read_bytes(), (tmp_path / "ca" / CA_CERT_FILE).read_bytes(),
                                                 DesktopUser("user", "/home/user"), 3128)
    checked = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    carried = b"".join(base64.b64decode(blob) for blob in re.findall(r"printf %s '([A-Za-z0-9+/=]{40,})'", script))
    assert b"BEGIN CERTIFICATE" in carried and b"PRIVATE KEY" not in carried and FORWARDER.read_bytes() in carried
    assert b"PRIVATE KEY" in (tmp_path / "ca" / "mitmproxy-ca.pem").read_bytes()
    assert oct((tmp_path / "ca").stat().st_mode & 0o777) == "0o700"


def test_a_tasks_service_folder_and_cassette_stay_on_the_host(tmp_path):
    """The guest reaches them only through the proxy: they are not among the files that travel in."""
    folder = tmp_path / "t"
    (folder / "site" / "deep").mkdir(parents=True)
    (folder / "site" / "deep" / "answer.html").write_text("the answer")
    (folder / "cassette.jsonl").write_text("")
    (folder / "helper.txt").write_text("travels")
    (task,) = suite_with(tmp_path, "network:\n  services: [{name: site.test, serve: site}]\n  replay: cassette.jsonl\n").tasks
    assert [p.name for p in task.files()] == ["helper.txt", "oracle.sh", "verify.sh"]


def test_replay_needs_each_networked_tasks_cassette_and_records_its_hash(tmp_path):
    from runner.choices import NetMode
    from runner.runs.episode_network import cassette_hashes

    (task,) = suite_with(tmp_path, "network:\n  allow: [https://example.com]\n  replay: cassette.jsonl\n").tasks
    with pytest.raises(UsageError, match="has no cassette to replay"):
        cassette_hashes((task,), NetMode.replay)
    (tmp_path / "t" / "cassette.jsonl").write_text('{"key": "GET https://example.com/ x"}\n')
    assert len(cassette_hashes((task,), NetMode.replay)["t"]) == 64
    assert cassette_hashes((task,), NetMode.live) == {}
