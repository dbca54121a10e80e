"""Scoring one episode in a sandbox: the guest's collected output is hostile, and at least one
upstream metric evaluates guest text as Python.

Each scoring is its own process under bubblewrap:
- in new namespaces (no network at all, its own PIDs, mounts, IPC, hostname), as uid 65534
  with no capabilities;
- seeing only /usr, the scoring venv and the benchmark's code (read-only), the inputs
  (read-only: the collected folder, the gold files, the job) and an empty scratch folder;
- with limits: address space, CPU seconds, file size, open files, and a wall-clock timeout
  after which its whole process group is killed.

What comes back is one JSON line on its stdout. A sandbox that dies, runs out of time or prints
no such line is a scoring error (verifier_error), with what it printed saved.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.errors import UsageError
from runner.frozen_clock import frozen_clock_env

ENTRY = Path(__file__).with_name("score_entry.py")
SANDBOX_UID = 65534


@dataclass(frozen=True)
class Limits:
    wall_s: float = 120.0
    cpu_s: int = 100
    memory_mib: int = 3072
    file_mib: int = 512
    open_files: int = 256


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


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise UsageError("bubblewrap (bwrap) is not installed: host scoring runs every metric in its sandbox",
                         fix="scripts/setup-host.sh installs it (apt-get install bubblewrap)")
    return found


def run_scorer(python: Path, package_root: Path, evaluator: dict[str, Any], collected: Path | None,
               assets: dict[str, Path], left_out: tuple[str, ...] = (), limits: Limits = Limits(),
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
            bwrap_path(), "--unshare-all", "--die-with-parent", "--new-session",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--symlink", "usr/bin", "/bin",
            "--ro-bind", str(venv), "/venv", "--ro-bind", str(package_root), "/evaluators",
            *(["--ro-bind", str(interpreter), str(interpreter)] if interpreter else []),
            "--ro-bind", str(inputs), "/in",
            *(["--ro-bind", str(collected), "/in/collected"] if collected is not None else []),
            "--bind", str(scratch), "/scratch", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--chdir", "/scratch",
            "--setenv", "HOME", "/scratch", "--setenv", "MPLCONFIGDIR", "/tmp",
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


MAX_READ_BYTES = 4 * 2**20  # of the metric's stdout (its answer is the last line) and of its stderr


def _last_bytes(handle) -> bytes:
    """The last MAX_READ_BYTES of the file HANDLE holds."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - MAX_READ_BYTES))
    return handle.read(MAX_READ_BYTES)


def _run(command: list[str], limits: Limits) -> Scoring:
    def limit() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mib * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mib * 2**20,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    started = time.monotonic()
    # The metric's output goes to files, not pipes: what it prints comes of files the agent made,
    # and the host reads back only its last MAX_READ_BYTES (the files are capped by RLIMIT_FSIZE).
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out_file, stderr=err_file,
                                   preexec_fn=limit, start_new_session=True,
                                   env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
        try:
            process.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return Scoring(None, error=f"the metric ran past {limits.wall_s:g} s and was killed",
                           seconds=time.monotonic() - started, stderr=_tail(_last_bytes(err_file)))
        out, err = _last_bytes(out_file), _last_bytes(err_file)
    seconds = time.monotonic() - started
    lines = [line for line in out.decode("utf-8", "replace").splitlines() if line.strip()]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        how = f"was killed by signal {-process.returncode}" if process.returncode < 0 else f"exited {process.returncode}"
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
