"""Faults around a run on real VMs: the runner killed, libvirtd restarted, a hung guest, a full
cache filesystem. Every planned episode ends up recorded exactly once, an infrastructure fault
never becomes the agent's score, and nothing is left behind."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from vmtools import cu_run, leftovers, qemu_pid, wait_for


def suite_of(tmp_path: Path, oracle: str, ids=("one", "two")) -> Path:
    """Tasks whose oracle runs ORACLE, then writes the goal; the verifier checks the goal."""
    suite = tmp_path / "suite"
    for task_id in ids:
        folder = suite / task_id
        folder.mkdir(parents=True)
        (folder / "task.yaml").write_text(f"id: {task_id}\ninstruction: write the goal\nprofile: linux\n"
                                          "timeout_s: 90\nwrite_set: {allow: ['~/goal.txt']}\n")
        (folder / "setup.sh").write_text('rm -f "$USER_HOME/goal.txt"\n')
        (folder / "oracle.sh").write_text(f'{oracle}\necho done > "$HOME/goal.txt"\n')
        (folder / "verify.sh").write_text('[ "$(cat "$USER_HOME/goal.txt")" = done ] && echo PASS || echo FAIL no goal\n')
    return suite


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]


def start_run(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runner", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "400"})


def agent_started(out: Path, task_id: str) -> bool:
    return (out / task_id / "1" / "initial.png").exists()


def restart_libvirtd() -> None:
    if subprocess.run(["systemctl", "is-active", "--quiet", "libvirtd"]).returncode == 0:
        subprocess.run(["systemctl", "restart", "libvirtd"], check=True)
    else:
        subprocess.run(["pkill", "-x", "libvirtd"], check=True)
        wait_for(lambda: subprocess.run(["pgrep", "-x", "libvirtd"]).returncode != 0, 60, "libvirtd to stop")
        subprocess.run(["libvirtd", "-d"], check=True)
    wait_for(lambda: Path("/run/libvirt/libvirt-sock").exists(), 60, "libvirtd's socket")


def test_libvirtd_restarted_mid_run_costs_no_episode(linux_image, host, settings, tmp_path):
    out = tmp_path / "run"
    proc = start_run("--suite", str(suite_of(tmp_path, "sleep 20")), "--agent", "oracle", "--vm-pool", "2",
                     "--out", str(out))
    try:
        wait_for(lambda: agent_started(out, "one") and agent_started(out, "two"), 600, "both agents to start")
        restart_libvirtd()
        _, err = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    latest = {r["task_id"]: r for r in records(out)}
    assert {t: r["outcome"] for t, r in latest.items()} == {"one": "pass", "two": "pass"}, latest
    assert leftovers(host, settings) == []


@pytest.mark.full  # an infra fault mid-episode: test_fault.py's killed VM; the blame: tests/unit/test_blame.py
def test_a_hung_guest_is_an_infrastructure_retry_not_the_agents_fault(linux_image, host, settings, tmp_path):
    """QEMU stopped with SIGSTOP while the agent runs: the agent's command times out, the host
    sees the stopped QEMU, and the episode is retried on a fresh VM, where it passes."""
    out = tmp_path / "run"
    proc = start_run("--suite", str(suite_of(tmp_path, "sleep 20", ids=("one",))), "--agent", "oracle",
                     "--out", str(out))
    try:
        wait_for(lambda: agent_started(out, "one"), 600, "the agent to start")
        domain = wait_for(lambda: next((d.name for d in host.cu_domains() if d.active and d.tag
                                        and d.tag.owner_pid == proc.pid), None), 60, "the episode's domain")
        os.kill(qemu_pid(domain), signal.SIGSTOP)
        _, err = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    (record,) = records(out)
    assert record["outcome"] == "pass" and record["attempts"] == 2, record
    kept = (out / "one" / "1.infra-attempt-1" / "infra_error.txt").read_text()
    assert "SIGSTOP" in kept, kept
    assert leftovers(host, settings) == []


def test_a_killed_runner_then_gc_and_resume_records_every_episode_once(linux_image, host, settings, tmp_path):
    out = tmp_path / "run"
    args = ["--suite", str(suite_of(tmp_path, "sleep 5", ids=("one", "two", "three"))), "--agent", "oracle",
            "--vm-pool", "2", "--out", str(out)]
    proc = start_run(*args)
    wait_for(lambda: (out / "results.jsonl").exists() and records(out), 900, "the first result")
    proc.kill()  # SIGKILL: no teardown at all
    proc.wait()
    first = records(out)

    cleaned = cu_run("gc")
    assert cleaned.returncode == 0, cleaned.stderr
    assert leftovers(host, settings) == []

    resumed = cu_run("run", *args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = records(out)
    by_episode = {}
    for r in final:
        by_episode.setdefault((r["task_id"], r["trial"]), []).append(r)
    assert set(by_episode) == {("one", 1), ("two", 1), ("three", 1)}
    # What finished before the kill was not redone; everything has exactly one record.
    assert all(len(v) == 1 for v in by_episode.values()), by_episode
    assert all(r in final for r in first)
    assert {r["outcome"] for r in final} == {"pass"}


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
def test_a_nearly_full_cache_filesystem_is_one_clear_infra_error(linux_image, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(home)], check=True)
    try:
        folder = home / "images" / "linux-test"
        folder.mkdir(parents=True)
        for entry in linux_image.folder.iterdir():
            if entry.name != "warm":
                (folder / entry.name).symlink_to(entry)
        out = tmp_path / "out"
        env = {**os.environ, "CU_RUN_HOME": str(home), "COLUMNS": "400"}
        result = subprocess.run([sys.executable, "-m", "runner", "run", "--suite", "linux-core", "--agent", "oracle",
                                 "--tasks", "folder-tree", "--start", "cold", "--out", str(out)],
                                capture_output=True, text=True, env=env, timeout=300)
        assert result.returncode == 3, result.stdout + result.stderr
        assert "MiB free" in result.stderr and "--cache-dir" in result.stderr and "Traceback" not in result.stderr
        assert not (out / "results.jsonl").exists() and not (home / "episodes").exists()
    finally:
        subprocess.run(["umount", str(home)], check=True)
    shutil.rmtree(home, ignore_errors=True)
