"""Many hosts on Ray, for real: `cluster local --hosts 2 --slots 1` (a Ray head and two nodes,
each a cu-run host with its own cache), real VMs under TCG, a host node SIGKILLed mid-run, a
driver killed mid-run, and clients without the token."""

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from vmtools import leftovers, wait_for

from runner.config import Settings
from runner.images.catalog import Catalog, sha256_file
from runner.tasks.model import SUITES_DIR

LINUX_CORE = sorted(t.name for t in (SUITES_DIR / "linux-core").iterdir() if t.is_dir())
# Validated on two hosts: four tasks are eight episodes, enough to need both hosts, and the
# task list crosses to the hosts as the run's other options do. All of linux-core is validated
# on one host by test_warm_start.py.
ON_TWO_HOSTS = ["calc-to-file", "env-var", "folder-tree", "zip-roundtrip"]


@pytest.fixture(scope="module")
def local_cluster(linux_image, host, tmp_path_factory):
    folder = tmp_path_factory.mktemp("cluster")
    log = (folder / "cluster-local.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "runner", "cluster", "local", "--hosts", "2", "--slots", "1",
                             "--dir", str(folder / "c")], stdout=subprocess.PIPE, stderr=log, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 300)
    line = proc.stdout.readline() if ready else ""
    assert line, f"cluster local printed nothing: {(folder / 'cluster-local.log').read_text()[-3000:]}"
    described = json.loads(line)
    described["env"] = {**os.environ, "RAY_AUTH_TOKEN_PATH": described["token_file"]}
    described["log"] = folder / "cluster-local.log"
    yield described
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    log.close()
    # Every node stopped, and neither host left a domain or an episode folder.
    assert proc.returncode is not None and not _nodes_of(described["address"]), "a Ray node of the cluster still runs"
    for h in described["hosts"]:
        assert leftovers(host, Settings.resolve(Path(h["cache_dir"]))) == []


def _nodes_of(address: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", f"ray start.*{address}"], capture_output=True, text=True).stdout
    return found.split()


def _in(cluster, *args: str, env=None, **kwargs) -> subprocess.CompletedProcess:
    env = env or cluster["env"]
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True,
                          env={**env, "COLUMNS": "400"}, **kwargs)


def _results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def _cluster_domains(host) -> list[str]:
    return [d.name for d in host.cu_domains()]


def test_a_client_without_the_cluster_s_token_is_refused(local_cluster, tmp_path):
    bare = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")} | {"HOME": str(tmp_path)}
    refused = _in(local_cluster, "cluster", "status", local_cluster["address"], env=bare)
    assert refused.returncode == 1 and "no token for the Ray cluster" in refused.stderr, refused.stderr[-2000:]
    (tmp_path / "wrong").write_text("not-the-token\n")
    wrong = _in(local_cluster, "cluster", "status", local_cluster["address"],
                env=bare | {"RAY_AUTH_TOKEN_PATH": str(tmp_path / "wrong")}, timeout=180)
    assert wrong.returncode == 1 and "refused this client" in wrong.stderr, wrong.stderr[-2000:]


@pytest.fixture(scope="module")
def validated(local_cluster, linux_image, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The validate run on both hosts, made once for the tests that read it, whichever asks first:
    a fixture, so what it checks does not hang on the order the tests run in. The hosts' caches are
    the cluster's own, so neither host has the image before it."""
    for h in local_cluster["hosts"]:
        assert Catalog(Path(h["cache_dir"]) / "images").find(linux_image.name) is None, "a host had the image already"
    out = tmp_path_factory.mktemp("validate") / "validate"
    return out, _in(local_cluster, "validate", "--suite", "linux-core", "--tasks", ",".join(ON_TWO_HOSTS),
                    "--cluster", local_cluster["address"], "--out", str(out))


def test_validate_linux_core_on_two_hosts(local_cluster, linux_image, validated):
    """Each host lacks the image at first: it receives the driver's, verified by sha256, and
    makes its warm state at first use."""
    out, result = validated
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    oracle, nop = _results(out / "oracle"), _results(out / "nop")
    assert sorted(r["task_id"] for r in oracle) == ON_TWO_HOSTS and {r["outcome"] for r in oracle} == {"pass"}
    assert sorted(r["task_id"] for r in nop) == ON_TWO_HOSTS and {r["outcome"] for r in nop} == {"fail"}
    assert {r["host"] for r in oracle + nop} == {"host-0", "host-1"}
    assert "received and its sha256 verified" in result.stderr

    for h in local_cluster["hosts"]:
        received = Catalog(Path(h["cache_dir"]) / "images").get(linux_image.name)
        assert sha256_file(received.disk) == linux_image.manifest.disk_sha256

    run = json.loads((out / "oracle" / "run.json").read_text())
    for name in ("host-0", "host-1"):
        facts = run["hosts"][name]
        assert facts["cpu"] and facts["cores"] >= 1 and facts["memory_gib"] > 0
        assert facts["accel"] in ("kvm", "tcg") and facts["qemu"] and facts["libvirt"]
    summary = json.loads((out / "oracle" / "summary.json").read_text())
    assert set(summary["hosts"]) == {"host-0", "host-1"}
    assert all(h["infra_error"] == 0 for h in summary["hosts"].values())
    assert "<h2>Hosts</h2>" in (out / "oracle" / "report.html").read_text()
    for task in ON_TWO_HOSTS:  # the artifacts came back to the driver's run folder
        assert (out / "oracle" / task / "1" / "final.png").stat().st_size > 0


def test_status_shows_each_host_s_slots_images_and_warm_states(local_cluster, linux_image, validated):
    """After the validate run: each host holds the image it was sent and the warm state it made."""
    status = _in(local_cluster, "cluster", "status", local_cluster["address"], "--json", timeout=120)
    assert status.returncode == 0, status.stderr[-2000:]
    hosts = {h["name"]: h for h in json.loads(status.stdout)["hosts"]}
    assert set(hosts) == {"host-0", "host-1"}
    for h in hosts.values():
        assert h["slots"] == 1 and h["accel"] in ("kvm", "tcg") and h["facts"]["cpu"]
        assert {"name": linux_image.name, "sha256": linux_image.manifest.disk_sha256, "profile": "linux"} in h["images"]
        assert h["warm"][linux_image.name] == [0] and h["in_flight"] == []


@pytest.mark.full  # a study's arms through the cluster pool; one arm's run is the default tier's validate above
def test_a_study_runs_its_arms_interleaved_on_the_clusters_hosts(local_cluster, host, tmp_path):
    study, out = tmp_path / "study.yaml", tmp_path / "study"
    study.write_text("suite: linux-core\ntasks: [env-var, folder-tree]\narms:\n"
                     "  - name: solved\n    agent: oracle\n  - name: untouched\n    agent: nop\n")
    done = _in(local_cluster, "study", "run", str(study), "--out", str(out), "--cluster", local_cluster["address"],
               timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for arm, outcome in (("solved", "pass"), ("untouched", "fail")):
        records = _results(out / arm)
        assert sorted(r["task_id"] for r in records) == ["env-var", "folder-tree"]
        assert {r["outcome"] for r in records} == {outcome}
        assert all(r["host"] in {"host-0", "host-1"} for r in records)
        assert all((out / arm / r["task_id"] / "1" / "episode.json").is_file() for r in records)
        where = json.loads((out / arm / "run.json").read_text())["cluster"]
        assert where["address"] == local_cluster["address"]
    keys = {json.loads((out / arm / "run.json").read_text())["cluster"]["run_key"] for arm in ("solved", "untouched")}
    assert len(keys) == 2  # each arm is a run of its own on the hosts
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["baseline"] == "solved" and comparison["against"]["untouched"]["overall"]["mean_task_delta"] == -1
    wait_for(lambda: not _cluster_domains(host), 180, "no domain left on either host")


@pytest.mark.full  # a rarer path; leases without VMs: tests/unit/test_cluster_host.py
def test_a_killed_driver_s_vms_are_destroyed_by_the_hosts(local_cluster, host, tmp_path):
    driver = subprocess.Popen([sys.executable, "-m", "runner", "run", "--suite", "linux-core", "--agent", "oracle",
                               "--cluster", local_cluster["address"], "--out", str(tmp_path / "run")],
                              env=local_cluster["env"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(_cluster_domains(host)) >= 2, 300, "both hosts to run an episode")
    finally:
        driver.kill()
        driver.wait()
    # The hosts stop hearing the driver's lease (30 s) and destroy its episodes' VMs.
    wait_for(lambda: not _cluster_domains(host), 120, "the hosts to destroy the dead driver's VMs")
    # Nothing already done is lost: --resume finishes the run, every episode recorded once.
    done = (tmp_path / "run" / "results.jsonl").read_text().splitlines() \
        if (tmp_path / "run" / "results.jsonl").exists() else []
    resumed = _in(local_cluster, "run", "--suite", "linux-core", "--agent", "oracle", "--cluster",
                  local_cluster["address"], "--out", str(tmp_path / "run"), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{len(LINUX_CORE) - len(done)} episodes to go" in resumed.stderr
    records = _results(tmp_path / "run")
    assert sorted(r["task_id"] for r in records) == LINUX_CORE and {r["outcome"] for r in records} == {"pass"}


@pytest.mark.full  # host join: the default tier's cluster is cluster local, the same node start
def test_a_machine_joins_as_a_host_and_leaves_on_sigterm(local_cluster, tmp_path):
    joined = subprocess.Popen([sys.executable, "-m", "runner", "host", "join", local_cluster["address"], "--slots", "1",
                               "--name", "joined", "--cache-dir", str(tmp_path / "joined")],
                              env=local_cluster["env"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        said = []
        while not said or "is serving" not in said[-1]:
            said.append(joined.stderr.readline())
            assert said[-1] or joined.poll() is None, "host join ended before it served:\n" + "".join(said)
        status = _in(local_cluster, "cluster", "status", local_cluster["address"], "--json", timeout=120)
        hosts = {h["name"]: h for h in json.loads(status.stdout)["hosts"]}
        assert hosts["joined"]["slots"] == 1 and hosts["joined"]["cache_dir"] == str(tmp_path / "joined")
    finally:
        joined.send_signal(signal.SIGTERM)
        rest = joined.communicate(timeout=120)[1]
    assert "host joined left" in rest
    status = _in(local_cluster, "cluster", "status", local_cluster["address"], "--json", timeout=120)
    assert {h["name"] for h in json.loads(status.stdout)["hosts"]} == {"host-0", "host-1"}


@pytest.mark.full  # a rarer path; lost hosts without VMs: tests/unit/test_cluster_dispatch.py
def test_a_host_killed_mid_run_loses_no_episode(local_cluster, host, tmp_path):
    out = tmp_path / "run"
    driver = subprocess.Popen([sys.executable, "-m", "runner", "run", "--suite", "linux-core", "--agent", "oracle",
                               "--cluster", local_cluster["address"], "--out", str(out)],
                              env={**local_cluster["env"], "COLUMNS": "400"}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (out / "results.jsonl").exists() and (out / "results.jsonl").read_text().strip(), 600,
             "the first result")
    # Killed with an episode in flight, so that it has something to lose.
    host0_episodes = Settings.resolve(Path(local_cluster["hosts"][0]["cache_dir"])).episodes_dir
    wait_for(lambda: any(d.active and d.tag and d.tag.workdir.is_relative_to(host0_episodes)
                         for d in host.cu_domains()), 300, "an episode's VM running on host-0")
    os.kill(local_cluster["hosts"][0]["pid"], signal.SIGKILL)
    stdout, stderr = driver.communicate(timeout=900)
    assert driver.returncode == 0, stdout[-2000:] + stderr[-5000:]
    assert "host host-0 was lost" in stderr
    records = _results(out)
    assert sorted(r["task_id"] for r in records) == LINUX_CORE  # every episode recorded exactly once
    assert {r["outcome"] for r in records} == {"pass"}
    # host-0's node comes back (cluster local restarts it); its actor collects what it left,
    # and nothing of the run is left on either host.
    wait_for(lambda: not _cluster_domains(host), 180, "no domain left on either host")
    for h in local_cluster["hosts"]:
        settings = Settings.resolve(Path(h["cache_dir"]))
        wait_for(lambda s=settings: leftovers(host, s) == [], 180, f"{h['name']} to collect its leftovers")
