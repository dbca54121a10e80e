"""The harness on real VMs: validate linux-core, a pool of two, interrupt and resume, honest outcomes."""

import json
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from vmtools import Lines, cu_run, leftovers, libvirt_paused, wait_for

from runner.tasks.model import SUITES_DIR


def episodes(run_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(run_dir.glob("*/*/episode.json"))]


def results(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


@pytest.mark.full  # cold boots: test_episode.py's VM; validate at pool 2: test_warm_start.py
def test_validate_linux_core_on_a_pool_of_two(linux_image, host, settings, tmp_path):
    """Cold on purpose: the boot path stays covered while the other e2e tests start warm."""
    out = tmp_path / "validate"
    result = cu_run("validate", "--suite", "linux-core", "--vm-pool", "2", "--start", "cold", "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]

    oracle, nop = results(out / "oracle"), results(out / "nop")
    assert sorted(r["task_id"] for r in oracle) == sorted(t.name for t in (SUITES_DIR / "linux-core").iterdir())
    assert {r["outcome"] for r in oracle} == {"pass"}
    assert len(nop) == 8 and {r["outcome"] for r in nop} == {"fail"}
    assert all("domain_start" in r["phases"] and "restore" not in r["phases"] for r in oracle + nop)

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


@pytest.mark.full  # resume after a kill: test_fault_matrix.py's killed runner, gc and resume
def test_interrupted_run_resumes_without_redoing_finished_episodes(linux_image, host, settings, tmp_path):
    out = tmp_path / "run"
    args = ["run", "--suite", "linux-core", "--agent", "oracle", "--tasks", "folder-tree,calc-to-file,zip-roundtrip",
            "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "runner", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    stderr = Lines(proc.stderr)
    results_file = out / "results.jsonl"

    def first_done_and_next_running() -> bool:
        assert proc.poll() is None, "the run ended before it could be interrupted:\n" + stderr.text()[-3000:]
        return bool(results_file.exists() and results_file.read_text().strip()
                    and any(d.active and d.tag and d.tag.owner_pid == proc.pid for d in host.cu_domains()))

    wait_for(first_done_and_next_running, 300, "the first episode's result with the next one's VM running")
    # Two signals, as an impatient user or a supervisor sends them: the second must not cut the
    # teardown short. libvirtd is paused so that the teardown, which must destroy the running VM,
    # is certainly still going when the second signal comes, however fast it would be.
    with libvirt_paused():
        proc.send_signal(signal.SIGTERM)
        stderr.wait_for("stopping: tearing down", 60)  # said once the shield is up
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=180)
    err = stderr.close()
    assert proc.returncode == 130, err[-2000:]
    assert "still tearing down" in err and "interrupted: 1 of 3 episodes have a result" in err, err[-2000:]
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


def test_scripted_agent_solves_tasks_through_the_gui_tools_alone(linux_image, tmp_path):
    import yaml

    out = tmp_path / "scripted"
    tasks = ["editor-write-save", "folder-tree", "calc-to-file"]
    result = cu_run("run", "--suite", "linux-core", "--agent", "scripted", "--tasks", ",".join(tasks),
                    "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    outcomes = {r["task_id"]: r for r in results(out)}
    assert {t: outcomes[t]["outcome"] for t in tasks} == {t: "pass" for t in tasks}, outcomes
    for t in tasks:
        steps = [s for s in yaml.safe_load((SUITES_DIR / "linux-core" / t / "ui_oracle.yaml").read_text()) if "tool" in s]
        lines = [json.loads(l) for l in (out / t / "1" / "trajectory.jsonl").read_text().splitlines()]
        assert [l["tool"] for l in lines] == [s["tool"] for s in steps]
        assert [l["step"] for l in lines] == list(range(1, len(steps) + 1))
        for line in lines:
            assert {"time", "tool", "arguments", "result", "duration_s"} <= set(line)
            if line["tool"].startswith("computer_use_screenshot"):
                assert (out / t / "1" / line["screenshot"]).read_bytes()[:4] == b"\x89PNG"
        config = json.loads((out / t / "1" / "mcp-config.json").read_text())
        assert config["mcpServers"]["cu-run"]["url"].startswith("http://127.0.0.1:")


COMMAND_AGENT = '''
import json, os, sys
import anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

async def call(client, name, args=None):
    result = await client.call_tool(name, args or {})
    if result.is_error:
        sys.exit(result.content[0].text)
    return result


async def until_window(client, holds):
    """Polls the window list until one window HOLDS, for at most two minutes."""
    for _ in range(240):
        windows = json.loads((await call(client, "computer_use_windows")).content[0].text)["windows"]
        if any(holds(w) for w in windows):
            return
        await anyio.sleep(0.5)
    sys.exit("the window never showed: " + repr(windows))


async def main():
    # A tool call can take seconds under TCG (the first window list runs python cold in the
    # guest); httpx's 5 s default would fail the agent, not the tool. MCP's own client waits 30 s.
    http = httpx2.AsyncClient(headers={"authorization": "Bearer " + os.environ["CU_RUN_MCP_TOKEN"]}, timeout=60)
    async with Client(streamable_http_client(os.environ["CU_RUN_MCP_URL"], http_client=http)) as client:
        await call(client, "computer_use_mouse_click", {"x": 200, "y": 150})
        await until_window(client, lambda w: w["app"] == "XTerm" and w["focused"])
        # The prompt puts the working folder in the terminal's title: the cd shows the command finished.
        await call(client, "computer_use_keyboard_type",
                   {"text": "mkdir -p ~/projects/alpha/docs ~/projects/beta/docs && cd ~/projects\\n"})
        await until_window(client, lambda w: w["title"].endswith(": ~/projects"))

print("instruction:", os.environ["CU_RUN_INSTRUCTION"])
anyio.run(main)
'''


def test_command_agent_and_the_step_limit(linux_image, tmp_path):
    agent = tmp_path / "agent.py"
    agent.write_text(COMMAND_AGENT)
    command = f"{sys.executable} {agent}"
    tools = ["--tools", "screen,mouse,keyboard,accessibility"]
    solved = cu_run("run", "--suite", "linux-core", "--agent", "command", "--agent-cmd", command, *tools,
                    "--tasks", "folder-tree", "--record", "--out", str(tmp_path / "ok"))
    assert solved.returncode == 0, solved.stderr[-3000:]
    (record,) = results(tmp_path / "ok")
    assert record["outcome"] == "pass", record
    # --record: the episode's screen as H.264 at the guest's size, from before the agent to after it.
    probe = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "stream=codec_name,width,height:format=duration", "-of", "json",
         str(tmp_path / "ok" / "folder-tree" / "1" / "recording.mp4")], capture_output=True, text=True).stdout)
    assert (probe["streams"][0]["codec_name"], probe["streams"][0]["width"], probe["streams"][0]["height"]) == \
        ("h264", 1280, 800)
    assert float(probe["format"]["duration"]) > 1.0
    assert "instruction: In your home folder" in (tmp_path / "ok" / "folder-tree" / "1" / "agent.log").read_text()

    limited = cu_run("run", "--suite", "linux-core", "--agent", "command", "--agent-cmd", command, *tools,
                     "--tasks", "folder-tree", "--max-steps", "1", "--out", str(tmp_path / "limited"))
    assert limited.returncode == 0, limited.stderr[-3000:]
    (record,) = results(tmp_path / "limited")
    assert record["outcome"] == "timeout" and "max-steps" in record["reason"]


def test_the_vnc_password_is_fresh_per_episode_and_never_written_down(linux_image, host, tmp_path):
    """Episodes, warm restores, MCP and the scripted agent all work with the password on; each
    episode has its own; no file of the run folder holds one; the folders are the runner's alone."""
    import re

    import libvirt

    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "runner", "run", "--suite", "linux-core", "--agent", "scripted",
                             "--tasks", "folder-tree", "--trials", "2", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    passwords = set()
    while proc.poll() is None:
        for d in host.cu_domains():
            if d.active and d.tag and d.tag.owner_pid == proc.pid:
                try:
                    xml = host.lookup(d.name).XMLDesc(libvirt.VIR_DOMAIN_XML_SECURE)
                except (libvirt.libvirtError, AttributeError):
                    continue  # gone while looking
                passwords.update(re.findall(r"passwd='([^']+)'", xml))
        time.sleep(0.5)
    _, err = proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert {r["outcome"] for r in results(out)} == {"pass"}
    assert len(passwords) == 2, passwords  # one per episode
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(p.encode() in data for p in passwords), f"{path} holds a VNC password"
    for folder in [out, *[p for p in out.rglob("*") if p.is_dir()]]:
        assert folder.stat().st_mode & 0o777 == 0o700, folder
