"""Scoring one episode in a sandbox: the guest's collected output is hostile, and at least one
upstream metric evaluates guest text as Python.

Each scoring is its own process in the host-side sandbox (runner.scoring.host_sandbox: new
namespaces, no network, nobody's uid, limits), seeing only /usr, the scoring venv and the
benchmark's code (read-only), the inputs (read-only: the collected folder, the gold files, the
job) and an empty scratch folder.

What comes back is one JSON line on its stdout. A sandbox that dies, runs out of time or prints
no such line is a scoring error (verifier_error), with what it printed saved.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.frozen_clock import frozen_clock_env
from runner.scoring.host_sandbox import Limits, bwrap_base, run_limited

__all__ = ["Limits", "Scoring", "run_scorer"]

ENTRY = Path(__file__).with_name("score_entry.py")
METRIC_LIMITS = Limits()


@dataclass(frozen=True)
class Scoring:
    """What scoring one episode came to: a score, or an error with its traceback."""

    score: float | None
    metrics: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    traceback: str = ""
    left_out: bool = False  # the metric needs a module the scoring venv leaves out
    seconds: float = 0.0
    stderr: str = ""


def run_scorer(python: Path, package_root: Path, evaluator: dict[str, Any], collected: Path | None,
               assets: dict[str, Path], left_out: tuple[str, ...] = (), limits: Limits = METRIC_LIMITS,
               clock: datetime | None = None) -> Scoring:
    """Scores EVALUATOR on COLLECTED (a folder pulled from the guest, or None when nothing was
    collected) with the metrics under PACKAGE_ROOT, run by PYTHON (the scoring venv's). CLOCK: the
    task's frozen clock, which the metric's process then reads as its time (libfaketime)."""
    with tempfile.TemporaryDirectory(prefix="cu-run-score-") as work:
        root = Path(work)
        inputs, scratch = root / "in", root / "scratch"
        inputs.mkdir()
        scratch.mkdir()
        shutil.copyfile(ENTRY, inputs / "score_entry.py")
        gold = {}
        (inputs / "assets").mkdir()
        for number, (url, path) in enumerate(sorted(assets.items())):
            target = inputs / "assets" / str(number)
            shutil.copyfile(path, target)
            gold[url] = f"/in/assets/{number}"
        job = {"evaluator": evaluator, "collected": "/in/collected", "assets": gold,
               "package_root": "/evaluators", "left_out": list(left_out), "scratch": "/scratch"}
        (inputs / "job.json").write_text(json.dumps(job))
        (inputs / "collected").mkdir()  # empty, or where the collected folder is mounted
        venv = python.parent.parent
        interpreter = _base_interpreter(venv)
        command = [
            *bwrap_base(scratch),
            "--ro-bind", str(venv), "/venv", "--ro-bind", str(package_root), "/evaluators",
            *(["--ro-bind", str(interpreter), str(interpreter)] if interpreter else []),
            "--ro-bind", str(inputs), "/in",
            *(["--ro-bind", str(collected), "/in/collected"] if collected is not None else []),
            "--setenv", "MPLCONFIGDIR", "/tmp",
            *(a for name, value in (frozen_clock_env(clock, "host-side scoring runs").items() if clock else ())
              for a in ("--setenv", name, value)),
            "--", f"/venv/bin/{python.name}", "-I", "/in/score_entry.py", "/in/job.json",
        ]
        return _run(command, limits)


def _base_interpreter(venv: Path) -> Path | None:
    """The installation the venv's Python comes from, when it is not under /usr (pyenv's, say):
    the sandbox sees it read-only at its own path, which the venv's links and pyvenv.cfg name."""
    config = venv / "pyvenv.cfg"
    if not config.is_file():
        return None
    for line in config.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            prefix = Path(value.strip()).resolve().parent
            return None if prefix.is_relative_to("/usr") else prefix
    return None


def _run(command: list[str], limits: Limits) -> Scoring:
    ran = run_limited(command, limits)
    out, err, seconds = ran.out, ran.err, ran.seconds
    if ran.returncode is None:
        return Scoring(None, error=f"the metric ran past {limits.wall_s:g} s and was killed", seconds=seconds,
                       stderr=_tail(err))
    lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        how = f"was killed by signal {-ran.returncode}" if ran.returncode < 0 else f"exited {ran.returncode}"
        return Scoring(None, error=f"the scoring process {how} without a result (memory or CPU limit, or a crash)",
                       seconds=seconds, stderr=_tail(err))
    if "error" in answer:
        return Scoring(None, error=str(answer["error"]), traceback=str(answer.get("traceback", "")),
                       left_out=bool(answer.get("left_out")), seconds=seconds, stderr=_tail(err))
    try:
        score = float(answer["score"])
    except (KeyError, TypeError, ValueError):
        return Scoring(None, error=f"the scoring process gave no number: {str(answer)[:200]}", seconds=seconds,
                       stderr=_tail(err))
    return Scoring(score, list(answer.get("metrics") or []), seconds=seconds, stderr=_tail(err))


def _tail(data: bytes, limit: int = 20000) -> str:
    return data.decode("utf-8", "replace")[-limit:]
