"""The harness on real VMs: validate linux-core, a pool of two, interrupt and resume, honest outcomes."""

import json
import select
import shutil
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from vmtools import cu_run, leftovers

from runner.tasks import SUITES_DIR


def episodes(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("*/*/episode.json"))]


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_validate_linux_core_on_a_pool_of_two(linux_image, host, settings, tmp_path):
    out = tmp_path / "validate"
    result = cu_run("validate", "--suite", "linux-core", "--vm-pool", "2", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]

    oracle, nop = results(out / "oracle"), results(out / "nop")
    assert sorted(r["task_id"] for r in oracle) == sorted(t.name for t in (SUITES_DIR / "linux-core").iterdir())
    assert {r["outcome"] for r in oracle} == {"pass"}
    assert len(nop) == 8 and {r["outcome"] for r in nop} == {"fail"}

    # Two slots really ran at once: some pair of episodes on different slots overlaps in time.
    spans = [(e["slot"], datetime.fromisoformat(e["started_at"]), datetime.fromisoformat(e["ended_at"]))
             for e in episodes(out / "oracle")]
    assert any(a[0] != b[0] and a[1] < b[2] and b[1] < a[2] for a in spans for b in spans)

    # Every episode left its artifacts and provenance; nothing is left running.
    for task_dir in (out / "oracle").iterdir():
        if task_dir.is_dir():
            for name in ("initial.png", "final.png", "setup.log", "verify.log", "agent.log", "episode.json"):
                assert (task_dir / "1" / name).exists(), f"{task_dir.name} has no {name}"
    run = json.loads((out / "oracle" / "run.json").read_text())
    assert run["image"]["sha256"] == linux_image.manifest.disk_sha256
    assert run["accel"]["used"] in ("kvm", "tcg") and run["host"]["cores"] >= 1
    assert len(run["suite"]["content_sha256"]) == 64 and run["ended_at"] >= run["started_at"]
    summary = json.loads((out / "oracle" / "summary.json").read_text())
    assert summary["overall"]["passes"] == 8 and summary["overall"]["rate"] == 1.0
    assert leftovers(host, settings) == []


def test_interrupted_run_resumes_without_redoing_finished_episodes(linux_image, host, settings, tmp_path):
    out = tmp_path / "run"
    args = ["run", "--suite", "linux-core", "--agent", "oracle", "--tasks", "folder-tree,calc-to-file,zip-roundtrip",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "runner", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    results_file = out / "results.jsonl"
    deadline = 300
    while not (results_file.exists() and results_file.read_text().strip()):
        select.select([], [], [], 1)
        deadline -= 1
        assert deadline > 0 and proc.poll() is None, "the first episode never finished"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode != 0
    first = results(out)
    assert len(first) == 1
    done = first[0]
    done_json = out / done["task_id"] / str(done["trial"]) / "episode.json"
    done_mtime = done_json.stat().st_mtime
    # Nothing leaked by the interruption.
    assert leftovers(host, settings) == []

    refused = cu_run(*args)
    assert refused.returncode == 1 and "--resume" in refused.stderr

    resumed = cu_run(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = results(out)
    assert sorted(r["task_id"] for r in final) == ["calc-to-file", "folder-tree", "zip-roundtrip"]
    assert final[0] == done  # the finished episode was not redone
    assert done_json.stat().st_mtime == done_mtime
    run = json.loads((out / "run.json").read_text())
    assert len(run["resumed_at"]) == 1


def _suite_of(tmp_path: Path, tasks: dict[str, dict[str, str]], timeout_s: int = 120) -> Path:
    suite = tmp_path / "contract"
    for task_id, scripts in tasks.items():
        folder = suite / task_id
        folder.mkdir(parents=True)
        (folder / "task.yaml").write_text(
            f"id: {task_id}\ninstruction: nothing\nprofile: linux\ntimeout_s: {scripts.pop('timeout_s', timeout_s)}\n")
        for name, body in scripts.items():
            (folder / name).write_text(body)
    return suite


def test_verifier_contract_and_timeouts_are_reported_honestly(linux_image, tmp_path):
    suite = _suite_of(tmp_path, {
        "pass-then-fail": {"verify.sh": "echo PASS\necho 'FAIL it changed its mind'\n", "oracle.sh": "true\n"},
        "says-nothing": {"verify.sh": "true\n", "oracle.sh": "true\n"},
        "traceback": {"verify.sh": "echo PASS\npython3 -c 'raise ValueError(42)'\n", "oracle.sh": "true\n"},
        "slow-agent": {"verify.sh": "echo PASS\n", "oracle.sh": "sleep 60\n", "timeout_s": "3"},
        "oracle-crashes": {"verify.sh": "echo PASS\n", "oracle.sh": "echo boom >&2; exit 7\n"},
    })
    out = tmp_path / "out"
    result = cu_run("run", "--suite", str(suite), "--agent", "oracle", "--vm-pool", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = {r["task_id"]: (r["outcome"], r["reason"]) for r in results(out)}
    assert outcomes["pass-then-fail"] == ("fail", "it changed its mind")
    assert outcomes["says-nothing"][0] == "verifier_error" and "printed nothing" in outcomes["says-nothing"][1]
    assert outcomes["traceback"][0] == "verifier_error"
    assert outcomes["slow-agent"][0] == "timeout"
    assert outcomes["oracle-crashes"][0] == "agent_error" and "boom" in outcomes["oracle-crashes"][1]


def test_malformed_task_stops_the_run_before_any_vm(host, tmp_path):
    suite = tmp_path / "bad"
    shutil.copytree(SUITES_DIR / "linux-core" / "folder-tree", suite / "folder-tree")
    (suite / "folder-tree" / "task.yaml").write_text("id: folder-tree\ninstruction: x\nprofile: linux\ntimeout_s: -5\n")
    before = {d.name for d in host.cu_domains()}
    result = cu_run("run", "--suite", str(suite), "--agent", "oracle", "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "task.yaml" in result.stderr and "timeout_s" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()
    assert {d.name for d in host.cu_domains()} == before


def test_lint_cli_on_windows_core_and_a_planted_error(tmp_path):
    assert cu_run("tasks", "lint", "--suite", "windows-core").returncode == 0
    suite = tmp_path / "windows-core"
    shutil.copytree(SUITES_DIR / "windows-core", suite)
    broken = suite / "zip-roundtrip" / "oracle.ps1"
    broken.write_text(broken.read_text() + "\nif ($true {\n")
    result = cu_run("tasks", "lint", "--suite", str(suite))
    assert result.returncode == 1 and "oracle.ps1" in result.stdout
