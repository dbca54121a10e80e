"""The `cu-run` inspect_ai sandbox on a real linux-test VM: Inspect's own conformance checks
(inspect_ai.util._sandbox.self_check, imported whole), and what cu-run adds: the computer tool
served from the VNC display, the connection, and commands as other accounts.
"""

from __future__ import annotations

import base64
import json

import httpx2
import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.util._sandbox.self_check import *  # noqa: F403 - Inspect's checks, collected here

from runner.sandbox.provider import CuRunConnection, CuRunSandbox
from runner.sandbox.task_vms import CuRunSandboxConfig, TaskVMs

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def sample_vm(linux_image, settings):
    """One sample's VM for the module's checks, as sample_init starts it (no cu-run task), in the
    live view."""
    options = CuRunSandboxConfig(image="linux-test", cache_dir=settings.cache_dir, live=True)
    vms = TaskVMs.open(options, print)
    episode, slot = vms.start_episode({}, print)
    yield CuRunSandbox(episode, slot, ("conformance", options))
    vms.end_episode(slot, interrupted=False)
    vms.close()


@pytest.fixture
def sandbox_env(sample_vm):
    """What Inspect's checks are given (the name they ask for)."""
    return sample_vm


async def test_exec_runs_as_the_desktop_user_and_root_is_the_admin_channel(sandbox_env):
    user = await sandbox_env.exec(["id", "-un"])
    root = await sandbox_env.exec(["id", "-un"], user="root")
    assert (user.stdout.strip(), root.stdout.strip()) == ("cu", "root")
    # The desktop user cannot reach what only the admin channel may.
    refused = await sandbox_env.exec(["sh", "-c", "cat /root/.ssh/authorized_keys"])
    assert not refused.success and "Permission denied" in refused.stderr


async def test_the_computer_tool_is_served_from_the_display(sandbox_env):
    found = await sandbox_env.exec(["test", "-r", "/opt/inspect/tool/computer_tool.py"])
    assert found.success, "Inspect finds the tool's sandbox by this file"
    shot = await sandbox_env.exec(["python3", "/opt/inspect/tool/computer_tool.py", "screenshot"])
    png = base64.b64decode(json.loads(shot.stdout)["base64_image"])
    assert png.startswith(b"\x89PNG")
    moved = await sandbox_env.exec(["python3", "/opt/inspect/tool/computer_tool.py", "mouse_move",
                                    "--coordinate", "321", "123"])
    assert "base64_image" in json.loads(moved.stdout)
    where = await sandbox_env.exec(["python3", "/opt/inspect/tool/computer_tool.py", "cursor_position"])
    assert json.loads(where.stdout)["output"] == "X=321,Y=123"
    unknown = await sandbox_env.exec(["python3", "/opt/inspect/tool/computer_tool.py", "zoom", "--region", "0", "0",
                                      "10", "10"])
    assert "not served" in json.loads(unknown.stdout)["error"]
    # Run in the guest by the agent's own shell, the file acts on nothing.
    direct = await sandbox_env.exec(["sh", "-c", "python3 /opt/inspect/tool/computer_tool.py screenshot"])
    assert "serves the computer tool" in json.loads(direct.stdout)["error"]
    actions = [json.loads(line)["action"] for line in
               (sandbox_env.episode.ep_dir / "trajectory.jsonl").read_text().splitlines()]
    assert actions[:2] == ["screenshot", "move"], "the actions are recorded for the safety rules"


async def test_connection_gives_the_screen(sandbox_env):
    connection = await sandbox_env.connection()
    assert isinstance(connection, CuRunConnection)
    assert connection.vnc == sandbox_env.episode.vm.endpoints.vnc and connection.vnc_password
    assert connection.ports[0].mappings[0].host_port == int(connection.vnc.rsplit(":", 1)[1])
    assert connection.command.startswith("ssh ")
    # The live view: its page with the token, refused without it.
    assert connection.live_view is not None and "token=" in connection.live_view
    assert httpx2.get(connection.live_view, timeout=30).status_code == 200
    assert httpx2.get(connection.live_view.split("?")[0], timeout=30).status_code == 401


FETCH = """import urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:3128"}))
print(opener.open("http://site.test/index.html", timeout=60).read().decode())
try:
    opener.open("http://elsewhere.test/from-the-sample", timeout=60)
except urllib.error.HTTPError as e:
    print("refused", e.code)
"""


def fetch_task(suite):
    """SUITE's task fetch: its folder site/ served as site.test, and it passes whatever the sample does."""
    task = suite / "fetch"
    (task / "site").mkdir(parents=True)
    (task / "site" / "index.html").write_text("served to the sample")
    (task / "task.yaml").write_text("id: fetch\ninstruction: Fetch the page.\nprofile: linux\ntimeout_s: 120\n"
                                    "write_set: {enabled: false}\n"
                                    "network:\n  services: [{name: site.test, serve: site}]\n")
    (task / "oracle.sh").write_text("true\n")
    (task / "verify.sh").write_text("verdict pass\n")
    return task


@pytest.mark.full  # a second linux-test VM of its own; the network's episode is covered by test_network.py
async def test_a_networked_task_gets_its_service_and_its_refusals_are_the_samples_violations(linux_image, settings,
                                                                                           tmp_path):
    """In the Inspect sandbox as in a run: the task's service reached by name through the proxy,
    and a request outside its origins refused and scored as a violation of the sample."""
    fetch_task(tmp_path / "suite")
    options = CuRunSandboxConfig(image="linux-test", cache_dir=settings.cache_dir, artifacts=tmp_path / "artifacts")
    vms = TaskVMs.open(options, print)
    try:
        episode, slot = vms.start_episode({"cu_run_suite": str(tmp_path / "suite"), "cu_run_task": "fetch"}, print)
        sandbox = CuRunSandbox(episode, slot, ("network", options))
        fetched = await sandbox.exec(["python3", "-c", FETCH])
        assert "served to the sample" in fetched.stdout and "refused 403" in fetched.stdout, fetched.stderr
        scored = episode.conclude()
        assert scored.outcome == "pass"
        assert [v.rule for v in scored.violations] == ["network"]
        assert "http://elsewhere.test/from-the-sample" in scored.violations[0].detail
        log = (episode.ep_dir / "network.jsonl").read_text()
        vms.end_episode(slot, interrupted=False)
        assert "http://site.test/index.html" in log
    finally:
        vms.close()


async def _fetch_sample(options: CuRunSandboxConfig, suite, name: str):
    """One sample of SUITE's fetch task in a sandbox of OPTIONS: what its FETCH printed, its
    score, its network log, and the sandbox's run folder."""
    vms = TaskVMs.open(options, print)
    try:
        episode, slot = vms.start_episode({"cu_run_suite": str(suite), "cu_run_task": "fetch"}, print)
        fetched = await CuRunSandbox(episode, slot, (name, options)).exec(["python3", "-c", FETCH])
        scored = episode.conclude()
        log = [json.loads(line) for line in (episode.ep_dir / "network.jsonl").read_text().splitlines()]
        vms.end_episode(slot, interrupted=False)
        return fetched, scored, log, vms.artifacts / vms.run_id
    finally:
        vms.close()


@pytest.mark.full  # two linux-test VMs of their own; the network's record and replay run in test_network.py
async def test_a_sample_records_its_network_and_a_later_one_replays_it_with_nothing_served(linux_image, settings,
                                                                                         tmp_path):
    """As `cu-run run --net record` then `--net replay`: the sandbox records a sample's answers,
    `cu-run assets cassettes` keeps them for the task, and a replaying sandbox answers the next
    sample from the cassette alone, its service not started (its page changed meanwhile)."""
    from runner.assets import AssetStore
    from runner.records.cassettes import keep_cassettes

    task = fetch_task(tmp_path / "suite")
    base = {"image": "linux-test", "cache_dir": settings.cache_dir}
    fetched, scored, log, run = await _fetch_sample(
        CuRunSandboxConfig(**base, artifacts=tmp_path / "record", net="record"), tmp_path / "suite", "record")
    assert "served to the sample" in fetched.stdout and "refused 403" in fetched.stdout, fetched.stderr
    assert scored.outcome == "pass" and [v.rule for v in scored.violations] == ["network"]
    kept = keep_cassettes(run, AssetStore(tmp_path / "assets"))
    assert list(kept.cassettes) == ["fetch"]

    (task / "site" / "index.html").write_text("changed: a replay must not serve this")
    fetched, scored, log, _ = await _fetch_sample(
        CuRunSandboxConfig(**base, artifacts=tmp_path / "replay", net="replay", assets=tmp_path / "assets"),
        tmp_path / "suite", "replay")
    assert "served to the sample" in fetched.stdout and "refused 403" in fetched.stdout, fetched.stderr
    assert scored.outcome == "pass" and [v.rule for v in scored.violations] == ["network"]
    verdicts = [e["verdict"] for e in log]
    assert "replayed" in verdicts and "allowed" not in verdicts, verdicts
