"""A task's network: block, read and refused as task.yaml's other fields are; what an episode
reports of it; and the guest's start script."""

from __future__ import annotations

import base64
import json
import re
import subprocess
from types import SimpleNamespace

import pytest

from runner.assets import AssetStore
from runner.choices import NetMode
from runner.errors import UsageError
from runner.network.settings import NetHosts, NetSettings
from runner.records.cassettes import keep_cassettes
from runner.network.proxy import CA_CERT_FILE, make_run_ca
from runner.profiles.base import DesktopUser
from runner.profiles.linux import LinuxNetworkEnd
from runner.runs.episode_network import FORWARDER, EpisodeNetwork, cassette_hashes
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
           {"t": 1e9, "mono": 17.0, "verdict": "background", "url": "accounts.google.com:443", "reason": "outside"},
           {"t": 1e9, "mono": 25.0, "verdict": "refused", "url": "http://late.test/", "reason": "verifier's"}]
    network = EpisodeNetwork(SimpleNamespace(entries=lambda: log))
    (violation,) = network.violations(10.0, 20.0)
    assert violation.rule == "network" and violation.detail.startswith("outside the allowed origins: http://evil.test/")
    assert len(violation.detail) < 700


def test_every_refusal_is_a_violation_whatever_refused_it_and_an_upstream_error_is_not():
    log = [{"mono": 11.0, "verdict": "refused", "stage": "read", "method": "POST", "url": "http://evil.test/upload",
            "reason": "Request body exceeds mitmproxy's body_size_limit; and http://evil.test:80 is outside"},
           {"mono": 12.0, "verdict": "refused", "stage": "read", "url": "", "reason": "Bad HTTP request line: b'X'"},
           {"mono": 13.0, "verdict": "refused", "stage": "tls", "url": "evil.test:443", "reason": "TLS: gave up"},
           {"mono": 14.0, "verdict": "error", "stage": "upstream", "url": "http://site.test/", "reason": "refused"},
           {"mono": 15.0, "verdict": "error", "stage": "tls", "url": "site.test:443", "reason": "TLS: unknown ca"},
           {"mono": 16.0, "verdict": "missed", "stage": "cassette", "url": "http://site.test/new"}]
    details = [v.detail for v in EpisodeNetwork(SimpleNamespace(entries=lambda: log)).violations(10.0, 20.0)]
    assert details == ["refused as sent: http://evil.test/upload (Request body exceeds mitmproxy's body_size_limit; "
                       "and http://evil.test:80 is outside)",
                       "refused as sent: (no URL) (Bad HTTP request line: b'X')",
                       "outside the allowed origins: evil.test:443 (TLS: gave up)"]


@pytest.mark.parametrize("refused_mono, window, violations", [
    ([12.0, 18.0], (10.0, 20.0), 1),
    ([5.0, 25.0], (10.0, 20.0), 1),  # which of them fell inside is not known: the agent's all the same
    ([21.0, 30.0], (10.0, 20.0), 0),  # the verifier's, after the agent
    (None, (10.0, 20.0), 0),  # what was dropped was allowed
])
def test_refusals_past_the_logs_cap_are_still_violations(refused_mono, window, violations):
    dropped = {"mono": 30.0, "verdict": "dropped", "lines": 10000, "refused_mono": refused_mono,
               "dropped": {"allowed": 5, **({"refused": 7} if refused_mono else {})}}
    found = EpisodeNetwork(SimpleNamespace(entries=lambda: [dropped])).violations(*window)
    assert len(found) == violations
    assert all(v.detail == "7 refused requests past network.jsonl's 10000 lines (counted, not written)" for v in found)


def test_the_linux_guest_start_script_is_sh_and_carries_the_certificate_never_the_key(tmp_path):
    make_run_ca(tmp_path / "ca")
    script = LinuxNetworkEnd().start_script(FORWARDER.read_bytes(), (tmp_path / "ca" / CA_CERT_FILE).read_bytes(),
                                            DesktopUser("user", "/home/user"), 3128)
    checked = subprocess.run(["sh", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    # What travels in base64: the parameters assigned in front of guest_agent/linux/network-start.sh.
    carried = b"".join(base64.b64decode(blob) for blob in re.findall(r"^[A-Z_]+='?([A-Za-z0-9+/=]{40,})'?$", script,
                                                                     flags=re.MULTILINE))
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
    (task,) = suite_with(tmp_path, "network:\n  allow: [https://example.com]\n  replay: cassette.jsonl\n").tasks
    with pytest.raises(UsageError, match="cassette .*cassette.jsonl is not a file"):
        cassette_hashes((task,), NetSettings(NetMode.replay))
    (tmp_path / "t" / "cassette.jsonl").write_text(answer("GET https://example.com/ x", "<p>hi</p>"))
    assert len(cassette_hashes((task,), NetSettings(NetMode.replay))["t"]) == 64
    assert cassette_hashes((task,), NetSettings(NetMode.live)) == {}


@pytest.mark.parametrize("content", [
    b"<!doctype html><html><body>a page saved in place of the cassette</body></html>\n",
    b'{"key": "GET https://example.com/ x"}\n',  # a key with no answer
    b"\xff\xfe not text\n",
])
def test_a_cassette_that_cannot_be_replayed_is_the_tasks_defect_said_by_lint_and_the_plan(tmp_path, content):
    from runner.tasks.lint import lint_suite

    (task,) = suite_with(tmp_path, "network:\n  allow: [https://example.com]\n  replay: cassette.jsonl\n").tasks
    (tmp_path / "t" / "cassette.jsonl").write_bytes(content)
    with pytest.raises(UsageError, match="task t's cassette cannot be replayed: .*cassette.jsonl"):
        cassette_hashes((task,), NetSettings(NetMode.replay))
    _count, problems = lint_suite(str(tmp_path))
    assert [p.message.split(":")[0] for p in problems] == ["not a cassette"], problems


def test_lint_refuses_a_replay_that_names_a_folder_and_a_suites_cassettes_json_that_is_not_json(tmp_path):
    from runner.tasks.lint import lint_suite

    suite_with(tmp_path, "network:\n  allow: [https://example.com]\n  replay: recorded\n")
    (tmp_path / "t" / "recorded").mkdir()
    (tmp_path / "cassettes.json").write_text("<html>not json</html>")
    _count, problems = lint_suite(str(tmp_path))
    messages = sorted(p.message for p in problems)
    assert any("replay: recorded is not a file of the task's folder" in m for m in messages), messages
    assert any("is not a list of kept cassettes" in m for m in messages), messages


def answer(key: str, body: str) -> str:
    return json.dumps({"key": key, "status": 200, "headers": [["Content-Type", "text/html"]],
                       "body": base64.b64encode(body.encode()).decode()}) + "\n"


def recording(run_dir, suite_dir, episodes: dict[str, list[str]]):
    """A stand-in for a --net record run's folder: run.json and each episode's cassette."""
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"suite": {"name": suite_dir.name, "path": str(suite_dir)},
                                                  "network": {"mode": "record", "tasks": ["t"]}}))
    for trial, text in enumerate(episodes["t"], 1):
        (run_dir / "t" / str(trial)).mkdir(parents=True)
        (run_dir / "t" / str(trial) / "cassette.jsonl").write_text(text)


def test_a_recordings_cassettes_are_kept_by_hash_named_in_the_suite_and_replayed_from_the_store(tmp_path):
    suite_dir = tmp_path / "suite"
    suite_with(suite_dir, "network:\n  allow: [https://example.com]\n")
    first = answer("GET https://example.com/ e3b0", "first") + answer("GET https://example.com/a e3b0", "a")
    second = answer("GET https://example.com/ e3b0", "second trial") + answer("GET https://example.com/b e3b0", "b")
    recording(tmp_path / "rec", suite_dir, {"t": [first, second]})
    store = AssetStore(tmp_path / "assets")
    kept = keep_cassettes(tmp_path / "rec", store)
    sha = kept.cassettes["t"].removeprefix("sha256:")
    # One cassette of both trials: each request's first answer, as a replay of either would give it.
    lines = [json.loads(line) for line in store.blob(sha).read_text().splitlines()]
    assert [(e["key"].split()[1], base64.b64decode(e["body"])) for e in lines] == [
        ("https://example.com/", b"first"), ("https://example.com/a", b"a"), ("https://example.com/b", b"b")]
    assert store.index()["cassette:suite/t"]["sha256"] == sha
    (task,) = load_suite(str(suite_dir)).tasks
    assert task.spec.network.replay == f"sha256:{sha}", "the suite's cassettes.json names it"

    assert cassette_hashes((task,), NetSettings(NetMode.replay, tmp_path / "assets")) == {"t": sha}
    with pytest.raises(UsageError, match="in an asset store, and none was given") as missing:
        cassette_hashes((task,), NetSettings(NetMode.replay))
    assert "--assets" in missing.value.fix
    store.blob(sha).write_text(answer("GET https://example.com/ e3b0", "altered"))
    with pytest.raises(UsageError, match="does not match its sha256"):
        cassette_hashes((task,), NetSettings(NetMode.replay, tmp_path / "assets"))


def test_keeping_cassettes_refuses_a_run_that_did_not_record_and_a_line_that_is_no_answer(tmp_path):
    suite_dir = tmp_path / "suite"
    suite_with(suite_dir, "network:\n  allow: [https://example.com]\n")
    recording(tmp_path / "rec", suite_dir, {"t": ['{"key": "GET https://example.com/ x"}\n']})
    with pytest.raises(UsageError, match="line 1 is not a cassette's answer"):
        keep_cassettes(tmp_path / "rec", AssetStore(tmp_path / "assets"))
    live = tmp_path / "live"
    live.mkdir()
    (live / "run.json").write_text(json.dumps({"suite": {"path": str(suite_dir)}, "network": {"mode": "live"}}))
    with pytest.raises(UsageError, match="not a recording"):
        keep_cassettes(live, AssetStore(tmp_path / "assets"))
    assert not (suite_dir / "cassettes.json").exists()


def test_a_suite_gives_its_allowed_sites_to_each_task_without_its_own_network(tmp_path):
    suite_with(tmp_path, "")
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "task.yaml").write_text("id: own\ninstruction: x\nprofile: linux\n"
                                                "network:\n  allow: [https://own.example]\n")
    for name in ("verify.sh", "oracle.sh"):
        (tmp_path / "own" / name).write_text("verdict pass\n")
    (tmp_path / "suite.yaml").write_text("network:\n  allow: [https://suite.example]\n")
    tasks = {t.id: t for t in load_suite(str(tmp_path)).tasks}
    assert tasks["t"].spec.network.allow == ("https://suite.example",)
    assert tasks["own"].spec.network.allow == ("https://own.example",), "a task's own block is the whole of it"
    (tmp_path / "suite.yaml").write_text("network:\n  services: [{name: a.test, serve: site}]\n")
    with pytest.raises(UsageError, match="services and replay belong to a task's own block"):
        load_suite(str(tmp_path))


def test_a_hosts_file_sends_allowed_names_to_stand_ins_and_is_refused_when_wrong_or_replaying(tmp_path):
    (tmp_path / "ca.pem").write_text("a CA")
    good = tmp_path / "hosts.yaml"
    good.write_text("hosts:\n  Blog.Example.org: 127.0.0.1:8443\n  '[::1]': ignored\nca: ca.pem\n")
    with pytest.raises(UsageError, match="is not name -> address:port"):
        NetHosts.load(good)  # an address is no name
    good.write_text("hosts:\n  Blog.Example.org: 127.0.0.1:8443\nca: ca.pem\n")
    hosts = NetHosts.load(good)
    assert hosts.hosts == {"blog.example.org": ("127.0.0.1", 8443)} and hosts.ca == (tmp_path / "ca.pem").resolve()
    assert hosts.record()["hosts"] == {"blog.example.org": "127.0.0.1:8443"}
    for text, message in (("hosts:\n  a.example: 127.0.0.1\n", "not name -> address:port"),
                          ("hosts:\n  a.example: 127.0.0.1:0\n", "not name -> address:port"),
                          ("hosts:\n  a.example: 127.0.0.1:80\nca: nowhere.pem\n", "is not a file"),
                          ("names: {}\n", "expected hosts:")):
        good.write_text(text)
        with pytest.raises(UsageError, match=message):
            NetHosts.load(good)
    with pytest.raises(UsageError, match="a replay connects to nothing"):
        NetSettings(NetMode.replay, hosts=hosts)


def test_the_cli_keeps_a_recordings_cassettes_and_says_how_to_replay_them(tmp_path):
    from typer.testing import CliRunner

    from runner.cli import app

    suite_dir = tmp_path / "suite"
    suite_with(suite_dir, "network:\n  allow: [https://example.com]\n")
    recording(tmp_path / "rec", suite_dir, {"t": [answer("GET https://example.com/ e3b0", "page")]})
    done = CliRunner().invoke(app, ["assets", "cassettes", str(tmp_path / "rec"), "--assets", str(tmp_path / "assets")])
    assert done.exit_code == 0, done.output
    flat = " ".join(done.output.split())
    assert "t: sha256:" in flat and "--net replay --assets" in flat
    empty = tmp_path / "empty"
    recording(empty, suite_dir, {"t": []})
    nothing = CliRunner().invoke(app, ["assets", "cassettes", str(empty), "--assets", str(tmp_path / "assets")])
    assert nothing.exit_code == 1 and "no episode of it was recorded" in " ".join(nothing.output.split())


def test_a_replay_leaves_out_the_networked_tasks_without_a_cassette_unless_they_are_named(tmp_path, settings, capsys):
    from runner.runs.run_plan import _network_ready

    suite_with(tmp_path / "with", "network:\n  allow: [https://example.com]\n  replay: cassette.jsonl\n")
    (tmp_path / "with" / "t" / "cassette.jsonl").write_text(answer("GET https://example.com/ e3b0", "page"))
    (kept,) = load_suite(str(tmp_path / "with")).tasks
    without = suite_with(tmp_path / "without", "network:\n  allow: [https://example.com]\n").tasks[0]
    without = type(without)(without.spec.model_copy(update={"id": "no-cassette"}), without.folder)
    replay = NetSettings(NetMode.replay)
    tasks, cassettes = _network_ready(settings, (kept, without), replay, named=False)
    assert [t.id for t in tasks] == ["t"] and list(cassettes) == ["t"]
    assert "left out of the replay, as they have no cassette: no-cassette" in capsys.readouterr().out
    with pytest.raises(UsageError, match="no-cassette has no cassette to replay"):
        _network_ready(settings, (kept, without), replay, named=True)
    with pytest.raises(UsageError, match="no task of the run has a cassette"):
        _network_ready(settings, (without,), replay, named=False)
    assert _network_ready(settings, (without,), NetSettings(NetMode.live), named=False) == ((without,), {})


def test_an_inspect_sandboxs_recording_is_kept_as_a_runs_is(tmp_path):
    """What the sandbox writes when it records (runner.sandbox.task_vms): RECORDING beside each
    sample's TASK/NNNN folder."""
    from runner.records.cassettes import RECORDING

    suite_dir = tmp_path / "suite"
    suite_with(suite_dir, "network:\n  allow: [https://example.com]\n")
    run = tmp_path / "inspect" / "run-1"
    for number, body in (("0001", "first"), ("0002", "second")):
        (run / "t" / number).mkdir(parents=True)
        (run / "t" / number / "cassette.jsonl").write_text(answer("GET https://example.com/ e3b0", body))
    (run / RECORDING).write_text(json.dumps({"suite": str(suite_dir), "tasks": ["t"]}))
    store = AssetStore(tmp_path / "assets")
    kept = keep_cassettes(run, store)
    (line,) = [json.loads(x) for x in store.blob(kept.cassettes["t"].removeprefix("sha256:")).read_text().splitlines()]
    assert base64.b64decode(line["body"]) == b"first", "the first sample's answer, as a run's first trial's"
    (task,) = load_suite(str(suite_dir)).tasks
    assert task.spec.network.replay == kept.cassettes["t"]


def test_a_refused_tunnels_connect_is_one_violation_or_stands_aside_for_the_page_named_in_it():
    """proxy_addon.py writes a refused CONNECT let through as it comes, and each line written in
    the tunnel carries its id: a refused one in the agent's time names the page and stands for it."""
    def line(mono, stage, url, tunnel="c1", verdict="refused"):
        return {"mono": mono, "verdict": verdict, "stage": stage, "url": url, "reason": "outside", "tunnel": tunnel}

    def details(entries, window=(10.0, 20.0)):
        found = EpisodeNetwork(SimpleNamespace(entries=lambda: entries)).violations(*window)
        return [v.detail.split(" (")[0].removeprefix("outside the allowed origins: ") for v in found]

    page = [line(11.0, "connect", "evil.test:443"), line(12.0, "request", "https://evil.test/a"),
            line(12.5, "request", "https://evil.test/b")]
    assert details(page) == ["https://evil.test/a", "https://evil.test/b"]
    assert details(page[:1]) == ["evil.test:443"], "nothing asked in it: the CONNECT is the violation"
    # A page asked for after the agent's time (the verifier's) leaves the CONNECT the agent's.
    assert details([line(11.0, "connect", "evil.test:443"), line(25.0, "request", "https://evil.test/a")]) == [
        "evil.test:443"]
    # Lines of another tunnel, or not refused, change nothing.
    assert details([line(11.0, "connect", "evil.test:443"), line(12.0, "request", "https://x.test/", tunnel="c2"),
                    line(13.0, "tls", "evil.test:443", verdict="error")]) == ["evil.test:443", "https://x.test/"]


@pytest.mark.parametrize("said", [
    '{"suite": "SUITE", "tasks": ["../outside"]}',  # a path, not one of the suite's tasks
    '{"suite": "SUITE", "tasks": "t"}',  # a string, not a list
    '{"suite": "SUITE"}',
    '{"suite": "ELSEWHERE", "tasks": ["t"]}',  # not a suite
    'not json',
])
def test_a_sandbox_recording_that_names_anything_but_its_suites_tasks_is_refused(tmp_path, said):
    from runner.records.cassettes import RECORDING

    suite_dir = tmp_path / "suite"
    suite_with(suite_dir, "network:\n  allow: [https://example.com]\n")
    (tmp_path / "elsewhere").mkdir()
    run = tmp_path / "run"
    (run / "t" / "0001").mkdir(parents=True)
    (run / "t" / "0001" / "cassette.jsonl").write_text(answer("GET https://example.com/ e3b0", "x"))
    (run / RECORDING).write_text(said.replace("SUITE", str(suite_dir)).replace("ELSEWHERE", str(tmp_path / "elsewhere")))
    with pytest.raises(UsageError):
        keep_cassettes(run, AssetStore(tmp_path / "assets"))
    assert not (suite_dir / "cassettes.json").exists() and not (tmp_path / "elsewhere" / "cassettes.json").exists()
