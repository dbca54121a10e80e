"""A study on VMs: two arms, the scripted agent on cu-run's own server and the same agent
through an external MCP server (`cu-run mcp --attach vnc://{vnc}` behind the recording proxy).
The default tier runs one task once per arm and reads the study's files; the full tier runs
two linux-core tasks x 2 trials, interleaved on a pool of two, killed midway and resumed
without redoing an episode, and the comparison finds no difference beyond noise."""

import json
import signal
import subprocess
import sys
from collections import Counter

import pytest

from vmtools import cu_run, wait_for

TASKS = ["editor-write-save", "folder-tree"]


def _records(folder):
    path = folder / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def study_file(tmp_path, tasks: list[str], trials: int):
    study = tmp_path / "study.yaml"
    study.write_text(f"""suite: linux-core
tasks: [{", ".join(tasks)}]
trials: {trials}
vm_pool: 2
arms:
  - name: own
    agent: scripted
  - name: attached
    agent: scripted
    mcp_server: "{sys.executable} -m runner mcp --attach vnc://{{vnc}}"
""")
    return study


def test_a_study_runs_each_arm_on_its_own_server_and_compares_them(linux_image, tmp_path):
    study, out = study_file(tmp_path, TASKS[:1], 1), tmp_path / "out"
    done = cu_run("study", "run", str(study), "--out", str(out))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    for arm in ("own", "attached"):
        assert [(r["task_id"], r["outcome"]) for r in _records(out / arm)] == [(TASKS[0], "pass")]
    assert (out / "attached" / TASKS[0] / "1" / "mcp-proxy.json").exists()
    assert not (out / "own" / TASKS[0] / "1" / "mcp-proxy.json").exists()
    assert json.loads((out / "study.json").read_text())["content"] == study.read_text()
    assert json.loads((out / "comparison.json").read_text())["baseline"] == "own"


@pytest.mark.full  # 8 episodes and a resume; the default tier runs one episode an arm (above)
def test_a_study_of_two_arms_killed_and_resumed(linux_image, tmp_path):
    study = study_file(tmp_path, TASKS, 2)
    out = tmp_path / "out"
    first = subprocess.Popen([sys.executable, "-m", "runner", "study", "run", str(study), "--out", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(_records(out / "own")) + len(_records(out / "attached")) >= 2, 900, "two episodes")
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=300)
    before = {arm: _records(out / arm) for arm in ("own", "attached")}
    assert sum(len(r) for r in before.values()) < 8, "the study finished before it could be killed"

    resumed = cu_run("study", "run", str(study), "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-4000:]
    for arm in ("own", "attached"):
        records = _records(out / arm)
        assert records[:len(before[arm])] == before[arm]  # nothing finished was redone or rewritten
        assert Counter((r["task_id"], r["trial"]) for r in records) == {(t, n): 1 for t in TASKS for n in (1, 2)}
        assert {r["outcome"] for r in records} == {"pass"}
        for r in records:
            steps = (out / arm / r["task_id"] / str(r["trial"]) / "trajectory.jsonl").read_text().splitlines()
            assert any(json.loads(s).get("screenshot") for s in steps)
    assert (out / "attached" / "editor-write-save" / "1" / "mcp-proxy.json").exists()
    assert not (out / "own" / "editor-write-save" / "1" / "mcp-proxy.json").exists()

    study_json = json.loads((out / "study.json").read_text())
    assert study_json["content"] == study.read_text() and len(study_json["sha256"]) == 64
    assert set(study_json["arms"]) == {"own", "attached"} and len(study_json["resumed_at"]) == 1
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["baseline"] == "own"
    assert comparison["against"]["attached"]["overall"]["beyond_noise"] is False
    assert "no difference beyond noise" in resumed.stderr
    assert "## attached against own" in (out / "comparison.md").read_text()


@pytest.mark.full  # two VMs held while the page is read; the live view's own test is test_live_view.py
def test_a_study_with_live_shows_every_arms_episodes_on_the_shared_slots(linux_image, tmp_path):
    from test_live_view import LiveRun, fetch, share_of

    stop, out = tmp_path / "stop", tmp_path / "out"
    waiter = f"sh -c 'while [ ! -e {stop} ]; do sleep 0.2; done'"
    study = tmp_path / "study.yaml"
    study.write_text(f"""suite: linux-core
tasks: [folder-tree]
vm_pool: 2
arms:
  - name: first
    agent: command
    agent_cmd: "{waiter}"
  - name: second
    agent: command
    agent_cmd: "{waiter}"
""")
    run = LiveRun("study", "run", str(study), "--out", str(out), "--live")
    try:
        base, token = run.url().split("/?token=")
        status = wait_for(lambda: (s := run.status(base, token)) and len(s["slots"]) == 2
                          and all(x["phase"].startswith("agent") for x in s["slots"]) and s, 600,
                          "both arms' episodes at their agents, one a slot")
        assert status["total"] == 2 and {x["task_id"] for x in status["slots"]} == {"folder-tree"}
        for slot in (0, 1):  # each slot's screen is its own VM's desktop
            assert share_of(fetch(f"{base}/api/screen/{slot}.png?token={token}")[1], (0x1F, 0x6F, 0x8B)) > 0.15
    finally:
        stop.touch()
        run.proc.communicate(timeout=900)
    assert run.proc.returncode in (0, 1, 4), "".join(run.stderr)[-4000:]  # the waiter makes no folders: fails
    for arm in ("first", "second"):
        assert [r["task_id"] for r in _records(out / arm)] == ["folder-tree"]
    assert json.loads((out / "comparison.json").read_text())["baseline"] == "first"
