"""The tamper suite on real VMs: an agent that, instead of doing the task, attacks its scoring.

Every task has an honest verifier (the goal file says done) and an oracle that never writes
the goal but tampers, as the desktop user, which is what any GUI agent gets once it opens the
terminal: it injects PASS into other processes' stdout, hijacks its shell start-up files, shadows
tools on its PATH, forces a command on its own SSH logins, tries sudo, fills the disk, reboots,
leaves a fake verifier where one was once staged, and leaves a 50 GB sparse file. None may pass,
and none may turn into an infra error that would drop it out of the rate.
"""

import json
from pathlib import Path

from vmtools import cu_run, leftovers

SUITE = Path(__file__).parent / "tamper_suite"


def test_no_tampering_agent_scores_a_pass_or_shrinks_the_denominator(linux_image, host, settings, tmp_path):
    out = tmp_path / "tamper"
    result = cu_run("run", "--suite", str(SUITE), "--agent", "oracle", "--vm-pool", "2", "--out", str(out),
                    timeout=3000)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == {p.name for p in SUITE.iterdir() if p.is_dir()}
    outcomes = {task: r["outcome"] for task, r in records.items()}
    assert set(outcomes.values()) == {"fail"}, outcomes  # every episode scored, none passed

    def episode(task: str, name: str) -> str:
        return (out / task / "1" / name).read_text()

    # The honest verifier decided every one, as the admin, untouched by the agent's tricks.
    for task in records:
        assert "FAIL goal.txt does not say done" in episode(task, "verify.log"), task
    # The agent's leftovers were frozen before anything was checked.
    assert "froze" in episode("stdout-injection", "quarantine.log")
    # sudo gave the desktop user nothing.
    attempts = episode("sudo-attempts", "agent.log")
    assert "INSTALLED" not in attempts and "STOPPED" not in attempts
    # The sparse file was listed in bounded time, by size and mtime instead of its 50 GB of content.
    write_set = json.loads(episode("sparse-file", "write-set.json"))
    assert "/home/cu/big.img" in write_set["compared_by_size_and_mtime"]
    assert "/home/cu/big.img (created)" in write_set["unexpected"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["scored"] == len(records) and summary["overall"]["rate"] == 0.0
    assert leftovers(host, settings) == []
