"""A verifier that judges the disk as read from outside: `scoring: disk`.

The task's `verify.py` runs on the host, not in the guest, in the sandbox host-side scoring uses
(runner.scoring.host_sandbox: no network, nobody's uid, the host's /usr read-only, limits), with
the host's own Python 3 (-I: the standard library only, nothing of cu-run's). It reads the files
its task named (`disk_files:`), as the guest's disk held them after the stop
(runner.scoring.disk_files), under /in/disk at their guest paths:

    python3 -I /in/verify.py /in/disk HOME

HOME is the desktop user's home in the guest (/home/cu), so the verifier finds ~/goal.txt at
/in/disk/home/cu/goal.txt; /in/disk/manifest.json says what each named path was. No code of the
agent's can run while it judges: there is none of it on the host, and nothing of the guest is
asked anything.

Its verdict is its exit code, which no file's text can forge: 0 is a pass, 1 a fail, anything
else (a crash, a limit, a timeout) gives no verdict and is judged as a guest verifier that gave
none is, against the nop control. Its last line of output is the reason, shown as text.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from runner.scoring.host_sandbox import Limits, bwrap_base, run_limited
from runner.scoring.verdict import Verdict, clean_reason

VERIFIER = "verify.py"
HOST_PYTHON = "/usr/bin/python3"
LIMITS = Limits(wall_s=60.0, cpu_s=50, memory_mib=1024, file_mib=64, open_files=64)


def verify_on_disk(task_dir: Path, disk_files: Path, home: str, limits: Limits = LIMITS) -> tuple[Verdict, str]:
    """Runs TASK_DIR's verify.py on DISK_FILES (copy_disk_files' folder). Returns the verdict and
    the verifier's log (its exit, its output and its errors), for verify.log."""
    with tempfile.TemporaryDirectory(prefix="cu-run-verify-") as work:
        scratch = Path(work) / "scratch"
        scratch.mkdir()
        script = Path(work) / VERIFIER
        shutil.copyfile(task_dir / VERIFIER, script)
        command = [*bwrap_base(scratch), "--ro-bind", str(script), "/in/verify.py",
                   "--ro-bind", str(disk_files), "/in/disk",
                   "--", HOST_PYTHON, "-I", "/in/verify.py", "/in/disk", home]
        ran = run_limited(command, limits)
    out = ran.out.decode("utf-8", "replace")
    err = ran.err.decode("utf-8", "replace")
    log = f"exit {ran.returncode}\n--- stdout\n{out[-20000:]}\n--- stderr\n{err[-20000:]}"
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    reason = clean_reason(lines[-1]) if lines else ""
    if ran.returncode == 0:
        return Verdict("pass", "", "exit"), log
    if ran.returncode == 1:
        return Verdict("fail", reason or "verify.py exited 1", "exit"), log
    if ran.returncode is None:
        return Verdict("error", f"verify.py ran past {limits.wall_s:g} s and was killed"), log
    how = f"was killed by signal {-ran.returncode}" if ran.returncode < 0 else f"exited {ran.returncode}"
    return Verdict("error", f"verify.py {how}: {clean_reason(err.strip()[-200:]) or 'no verdict'}"), log
