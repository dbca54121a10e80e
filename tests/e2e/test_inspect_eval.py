"""cu-run inside `inspect eval`, on real VMs: the example task (Inspect's computer() tool, served
by the `cu-run` sandbox, driven by a scripted solver with no model), and a cu-run suite as an
Inspect task (cu_run/suite) whose solver attacks the verifier as the desktop user."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.log import read_eval_log

from headless_page import images_in_inspect_view
from vmtools import leftovers

REPO = Path(__file__).resolve().parents[2]
INSPECT = Path(sys.executable).parent / "inspect"
TAMPER = ["forged-newline", "stdout-injection", "rc-hijack"]


def inspect_eval(target: str, logs: Path, settings, *args: str):
    """`inspect eval TARGET` from the repository (Inspect takes task files relative to it), in the
    tests' cache; its one log, read back."""
    env = {**os.environ, "CU_RUN_HOME": str(settings.cache_dir)}
    done = subprocess.run([str(INSPECT), "eval", target, "--model", "mockllm/model", "--log-dir", str(logs),
                           "--display", "plain", *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (log_file,) = logs.glob("*.eval")
    return read_eval_log(str(log_file))


def test_the_example_passes_one_sample_and_fails_the_other(linux_image, settings, host, tmp_path):
    log = inspect_eval("examples/inspect_task.py", tmp_path, settings)
    assert log.status == "success"
    scores = {s.id: next(iter(s.scores.values())) for s in log.samples}
    assert {k: v.value for k, v in scores.items()} == {"solves": "C", "stops-halfway": "I"}
    assert "beta/docs" in scores["stops-halfway"].explanation, "the task's own verifier said why"
    for sample in log.samples:  # every computer() step came back with the screen, for inspect view
        images = [c for m in sample.messages if m.role == "tool" and isinstance(m.content, list)
                  for c in m.content if c.type == "image"]
        assert len(images) == 4, sample.id
        folder = Path(next(iter(sample.scores.values())).metadata["episode_folder"])
        assert (folder / "verify.log").is_file() and (folder / "trajectory.jsonl").is_file()
    assert leftovers(host, settings) == []
    assert not [d for d in host.cu_domains() if d.tag and d.tag.owner_pid == os.getpid()]
    assert images_in_inspect_view(tmp_path, Path(log.location).name, "solves", "messages") >= 4, \
        "inspect view shows the steps' screenshots"


@pytest.mark.full  # the trust model's sample runs as `cu-run run` in the default tier (test_tamper.py), and the
# scorer is the run's episode script; cu_run/suite is resolved and built in tests/unit/test_inspect_computer.py
def test_a_suite_as_an_inspect_task_gives_a_tamper_solver_no_pass(linux_image, settings, host, tmp_path):
    suite = REPO / "tests" / "e2e" / "tamper_suite"
    log = inspect_eval("cu_run/suite", tmp_path, settings, "-T", f"suite={suite}", "-T", f"tasks={','.join(TAMPER)}",
                       "--solver", "tests/e2e/inspect_tamper_solver.py@tamper")
    assert log.status == "success", "no attack may turn into an error that drops the sample out"
    scores = {s.id: next(iter(s.scores.values())) for s in log.samples}
    assert set(scores) == set(TAMPER)
    assert {k: v.value for k, v in scores.items()} == dict.fromkeys(TAMPER, "I"), \
        {k: v.explanation for k, v in scores.items()}
    for task in ("forged-newline", "rc-hijack", "stdout-injection"):  # the honest verifier decided
        verify_log = Path(scores[task].metadata["episode_folder"]) / "verify.log"
        assert "FAIL" in verify_log.read_text(), task
    assert leftovers(host, settings) == []
