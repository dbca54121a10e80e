"""A cluster run honours every run option that changes an episode, exactly as a run on this machine
does: the driver sends its RunRequest whole (RunOrder.of), and a host builds its episodes' agent,
tasks and pool with the functions a local run uses (runner.runs.episode_inputs, scope.pool_for).
Without Ray: the order is pickled and unpickled as Ray would carry it, and the host runs on
libvirt's test:///default driver with a fake image."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from runner.cluster import host_service
from runner.cluster.host_service import HostService, RunOrder
from runner.config import Settings
from runner.hypervisor.accel import AccelProbe
from runner.runs import scope as scope_module
from runner.runs.episode_inputs import episode_tasks, net_settings, request_agent
from runner.runs.request import RUN_OPTIONS, RunRequest
from runner.runs.run_plan import plan_run
from runner.runs.scope import ScopeRequest, make_scope
from runner.hypervisor.libvirt_host import LibvirtHost
from test_catalog import make_image

# Every run option that changes what an episode does (the table's `episode` column:
# runner.runs.request.RUN_OPTIONS), set away from its default.
CHANGED = dict(agent="command", agent_cmd="/bin/true --flag", agent_env=(("LAB_GATEWAY", "http://10.0.0.9"),),
               timeout_s=77, tools=("screen", "keyboard"), max_steps=9, max_turns=7, record=True,
               standby=False, agent_script="ui_other.yaml", mcp_server=None, net="record")


def host_image(cache: Path) -> None:
    """A linux-test image in CACHE's catalog, as far as a run's plan and a host's checks look."""
    import json

    folder = make_image(cache / "images", disk_bytes=os.urandom(4096))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["ssh"]["admin_private_key"] = "keys/admin_key"
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture
def no_probe(monkeypatch):
    monkeypatch.setattr(scope_module, "cached_probe", lambda *_a: AccelProbe(False, "test: no KVM probe"))


def what_an_episode_gets(scheduler, tasks) -> dict:
    pool, agent = scheduler.pool, scheduler.agent
    return {"toolsets": pool.toolsets, "max_steps": pool.max_steps, "record": pool.record,
            "standby_asked": pool.standby, "mcp_server": pool.mcp_server, "net": pool.net, "agent": type(agent).__name__,
            "agent_command": getattr(agent, "argv", None), "agent_env": getattr(agent, "env", None),
            "timeouts": sorted({t.spec.timeout_s for t in tasks})}


def test_every_option_that_changes_an_episode_is_one_the_test_sets():
    # The command agent takes no appended prompt and no model (claude and codex do); the whole request
    # reaches a host, so they travel as the others do.
    episode = {row.name for row in RUN_OPTIONS if row.episode}
    assert episode - set(CHANGED) - {"net_hosts"} == {
        "append_prompt", "mcp_server_url", "model"}  # net_hosts: a file, which the test below writes


def test_a_cluster_host_builds_the_episodes_a_local_run_builds(tmp_path, no_probe, monkeypatch):
    cache = tmp_path / "host-cache"
    host_image(cache)
    settings = Settings.resolve(cache, "test:///default")
    (tmp_path / "net-hosts.yaml").write_text("hosts:\n  site.example: 127.0.0.1:8443\n")
    request = RunRequest.of("linux-core", out=tmp_path / "run", start="cold", net_hosts=tmp_path / "net-hosts.yaml",
                            **CHANGED)
    plan = plan_run(settings, request)
    order = pickle.loads(pickle.dumps(RunOrder.of(request, plan, "run-key")))  # as Ray carries it

    # On this machine: the run's scope and the functions a local run builds its pool with.
    local_host = LibvirtHost("test:///default")
    try:
        scope = make_scope(settings, ScopeRequest(plan.image.name, start="cold", vm_pool=1), local_host)
        local_tasks = episode_tasks(request.work, plan.tasks)
        local_agent = request_agent(request.agent, local_tasks)
        local = scope.pool_for(request.agent, request.how, local_agent, plan.suite.safety,
                               net=net_settings(request.how, request.work.assets))
    finally:
        local_host.close()

    # On a cluster host, from the order alone.
    monkeypatch.setattr(host_service, "collect_garbage", lambda *_a: type("R", (), {"removed": []})())
    service = HostService("host-0", str(cache), slots=1, libvirt_uri="test:///default")
    started = service.begin_run(order)
    run = service._runs["run-key"]
    tasks = list(run.tasks.values())
    assert started["start"] == "cold"
    got = what_an_episode_gets(run.scheduler, tasks)
    assert got == {"toolsets": local.toolsets, "max_steps": local.max_steps, "record": local.record,
                   "standby_asked": local.standby, "mcp_server": local.mcp_server, "net": local.net,
                   "agent": type(local_agent).__name__,
                   "agent_command": getattr(local_agent, "argv", None), "agent_env": getattr(local_agent, "env", None),
                   "timeouts": sorted({t.spec.timeout_s for t in local_tasks})}
    # And each is what was asked, not a default.
    assert got["toolsets"] == ("screen", "keyboard") and got["max_steps"] == 9 and got["record"] is True
    assert got["standby_asked"] is False and got["timeouts"] == [77] and got["net"].mode == "record"
    assert got["net"].hosts.hosts == {"site.example": ("127.0.0.1", 8443)}
    assert got["agent_command"] == ["/bin/true", "--flag"] and got["agent_env"] == {"LAB_GATEWAY": "http://10.0.0.9"}
    service.end_run("run-key")
    service.host.close()


def test_an_appended_prompt_reaches_a_cluster_hosts_claude(tmp_path, no_probe, monkeypatch):
    """append_prompt is the claude and codex agents': checked with a stand-in claude CLI on PATH."""
    cache = tmp_path / "host-cache"
    host_image(cache)
    settings = Settings.resolve(cache, "test:///default")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\necho 'stand-in claude 1.0'\n")
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    request = RunRequest.of("linux-core", "claude", append_prompt="You are in a lab.", out=tmp_path / "run",
                         start="cold")
    plan = plan_run(settings, request)
    monkeypatch.setattr(host_service, "collect_garbage", lambda *_a: type("R", (), {"removed": []})())
    service = HostService("host-0", str(cache), slots=1, libvirt_uri="test:///default")
    service.begin_run(pickle.loads(pickle.dumps(RunOrder.of(request, plan, "k"))))
    agent = service._runs["k"].scheduler.agent
    assert agent.append_prompt == "You are in a lab."
    service.end_run("k")
    service.host.close()
