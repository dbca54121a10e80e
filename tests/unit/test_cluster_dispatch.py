"""The driver's queue over cluster hosts: every planned episode is recorded exactly once, a lost
host's episode goes to another host, and a cluster with no host left ends instead of hanging.
The hosts are fakes at the dispatcher's seam (RemoteHost); tests/e2e/test_cluster.py runs the
real thing, Ray, VMs and a SIGKILLed node."""

import io
import json
import tarfile
import threading
from dataclasses import asdict
from datetime import UTC, datetime

from runner.cluster.dispatch import ClusterPool, HostLost, RunOutput
from runner.cluster.host_service import pack_episode, unpack_episode
from runner.records.results import EpisodeRecord, ResultLog, by_host
from runner.tasks.model import load_suite


class FakeClusterHost:
    """Runs every episode at once and passes it, unless told to be lost on its Nth call or to fail."""

    def __init__(self, name: str, slots: int = 1, lost_on_call: int | None = None, fails: bool = False) -> None:
        self.name = name
        self.slots = slots
        self.lost_on_call = lost_on_call
        self.fails = fails
        self.calls = 0
        self.runs: list[tuple[int, str]] = []
        self._lock = threading.Lock()

    def run_episode(self, run, task_id, trial, slot, stop):
        with self._lock:
            self.calls += 1
            call = self.calls
            self.runs.append((run, task_id))
        if self.lost_on_call is not None and call >= self.lost_on_call:
            raise HostLost("node killed")
        if self.fails:
            raise RuntimeError("the host's code broke")
        now = datetime.now(UTC).isoformat()
        record = EpisodeRecord(task_id, trial, "pass", "", 1.0, slot, 1, now, now, {"agent": 0.5}, host=self.name)
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            data = json.dumps({"task": task_id, "host": self.name}).encode()
            info = tarfile.TarInfo(f"{trial}/episode.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return asdict(record), buffer.getvalue()


def _work():
    tasks = load_suite("linux-core").tasks
    return [(0, t, 1) for t in tasks]


def _pool(tmp_path, hosts, **kw):
    notices = []
    pool = ClusterPool(hosts, [RunOutput(tmp_path, ResultLog(tmp_path))], on_notice=notices.append, **kw)
    return pool, notices


def test_a_lost_host_s_episode_runs_on_another_host_and_is_recorded_once(tmp_path):
    lost, kept = FakeClusterHost("host-0", lost_on_call=2), FakeClusterHost("host-1")
    pool, notices = _pool(tmp_path, [lost, kept])
    work = _work()
    pool.run(work)
    records = ResultLog(tmp_path).records()
    assert sorted(r.task_id for r in records) == sorted(t.id for _run, t, _trial in work)  # each exactly once
    assert all(r.outcome == "pass" for r in records)
    retried = [r for r in records if r.attempts == 2]
    assert len(retried) == 1 and retried[0].host == "host-1"
    assert (tmp_path / retried[0].task_id / "1.lost-on-host-0-1" / "infra_error.txt").read_text().startswith(
        "host host-0 was lost")
    assert pool.lost_hosts == {"host-0": "node killed"} and "host-0 was lost" in notices[0]
    assert json.loads((tmp_path / work[0][1].id / "1" / "episode.json").read_text())["task"] == work[0][1].id
    assert {r.host for r in records} == {"host-0", "host-1"}
    assert all("dispatch" in r.phases for r in records)


def test_with_no_host_left_the_pool_ends_and_the_rest_has_no_record(tmp_path):
    pool, _ = _pool(tmp_path, [FakeClusterHost("host-0", lost_on_call=1), FakeClusterHost("host-1", lost_on_call=1)])
    pool.run(_work())
    assert ResultLog(tmp_path).records() == []
    assert set(pool.lost_hosts) == {"host-0", "host-1"} and pool.alive == []


def test_a_pool_of_two_runs_keeps_each_runs_episodes_in_its_own_folder_and_results(tmp_path):
    # A study's arms on a cluster: each episode goes to its run on the host, and comes back to
    # its run's folder and results.
    host = FakeClusterHost("host-0", slots=2)
    outputs = [RunOutput(tmp_path / arm, ResultLog(tmp_path / arm)) for arm in ("a", "b")]
    for output in outputs:
        output.out_dir.mkdir()
    tasks = load_suite("linux-core").tasks[:2]
    ClusterPool([host], outputs).run([(run, t, 1) for t in tasks for run in (0, 1)])
    for arm in ("a", "b"):
        assert sorted(r.task_id for r in ResultLog(tmp_path / arm).records()) == sorted(t.id for t in tasks)
        assert all((tmp_path / arm / t.id / "1" / "episode.json").is_file() for t in tasks)
    assert sorted(host.runs) == sorted((run, t.id) for t in tasks for run in (0, 1))


def test_an_episode_whose_hosts_keep_dying_ends_as_an_infra_error(tmp_path):
    pool, _ = _pool(tmp_path, [FakeClusterHost("host-0", lost_on_call=1), FakeClusterHost("host-1")], retries=0)
    work = _work()[:1]
    pool.run(work)
    [record] = ResultLog(tmp_path).records()
    assert record.outcome == "infra_error" and "lost 1 times (host-0)" in record.reason


def test_a_host_whose_code_fails_records_an_infra_error_and_the_run_goes_on(tmp_path):
    pool, _ = _pool(tmp_path, [FakeClusterHost("host-0", fails=True)])
    work = _work()[:2]
    pool.run(work)
    records = ResultLog(tmp_path).records()
    assert [r.outcome for r in records] == ["infra_error", "infra_error"]
    assert "host host-0 failed: the host's code broke" in records[0].reason


def test_per_host_breakdown_counts_infra_errors_and_phase_medians():
    now = datetime.now(UTC).isoformat()
    records = [EpisodeRecord("a", 1, "pass", "", 1, 0, 1, now, now, {"agent": 2.0}, host="h0"),
               EpisodeRecord("b", 1, "pass", "", 1, 0, 1, now, now, {"agent": 4.0}, host="h0"),
               EpisodeRecord("c", 1, "infra_error", "x", 1, 0, 3, now, now, {}, host="h1")]
    hosts = by_host(records)
    assert hosts["h0"] == {"episodes": 2, "infra_error": 0, "attempts": 2, "phase_medians": {"agent": 3.0}}
    assert hosts["h1"]["infra_error"] == 1 and hosts["h1"]["attempts"] == 3


def test_an_episode_s_artifacts_leave_the_host_with_its_failed_attempts_only(tmp_path):
    host_run = tmp_path / "host"
    for name in ("1", "1.infra-attempt-1", "10"):
        (host_run / "t" / name).mkdir(parents=True)
        (host_run / "t" / name / "episode.json").write_text(name)
    data = pack_episode(host_run, "t", 1)
    assert sorted(p.name for p in (host_run / "t").iterdir()) == ["10"]  # trial 10 is not trial 1's
    unpack_episode(data, tmp_path / "driver" / "t")
    assert sorted(p.name for p in (tmp_path / "driver" / "t").iterdir()) == ["1", "1.infra-attempt-1"]


def test_artifacts_cannot_land_outside_the_task_folder(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    try:
        unpack_episode(buffer.getvalue(), tmp_path / "t")
    except tarfile.TarError:
        pass
    assert not (tmp_path / "escaped.txt").exists()
