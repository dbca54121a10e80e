"""The sandbox every program that scores on the host runs in: an imported benchmark's metric
(runner.benchmarks.sandbox) and a disk-scored task's verify.py (runner.scoring.disk_verifier).
What they read comes of the guest, so of the agent: hostile.

Each run is its own process under bubblewrap:
- in new namespaces (no network at all, its own PIDs, mounts, IPC, hostname), as uid 65534
  with no capabilities;
- seeing only the host's /usr (read-only), what its caller binds in, and an empty scratch folder;
- with limits: address space, CPU seconds, file size, open files, and a wall-clock timeout
  after which its whole process group is killed; its output read back bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from runner.errors import UsageError

SANDBOX_UID = 65534


@dataclass(frozen=True)
class Limits:
    wall_s: float = 120.0
    cpu_s: int = 100
    memory_mib: int = 3072
    file_mib: int = 512
    open_files: int = 256


def bwrap_path() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise UsageError("bubblewrap (bwrap) is not installed: what scores on the host runs in its sandbox",
                         fix="scripts/setup-host.sh installs it (apt-get install bubblewrap)")
    return found


def bwrap_base(scratch: Path) -> list[str]:
    """bubblewrap's words for the sandbox every host-side scoring runs in (this module's header):
    new namespaces, the host's /usr read-only, SCRATCH writable at /scratch, nobody's uid. The
    caller adds what its program reads, then "--" and the program."""
    return [
        bwrap_path(), "--unshare-all", "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--bind", str(scratch), "/scratch", "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--chdir", "/scratch", "--setenv", "HOME", "/scratch",
    ]


MAX_READ_BYTES = 4 * 2**20  # of the metric's stdout (its answer is the last line) and of its stderr


def _last_bytes(handle) -> bytes:
    """The last MAX_READ_BYTES of the file HANDLE holds."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(max(0, size - MAX_READ_BYTES))
    return handle.read(MAX_READ_BYTES)


@dataclass(frozen=True)
class Ran:
    """What a sandboxed program came to: its exit code (negative: the signal that killed it; None:
    killed past its wall-clock limit), the last MAX_READ_BYTES of its output, and its time."""

    returncode: int | None
    out: bytes
    err: bytes
    seconds: float


def run_limited(command: list[str], limits: Limits) -> Ran:
    """COMMAND (a bwrap_base sandbox) under LIMITS, its output read back bounded."""
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
            return Ran(None, b"", _last_bytes(err_file), time.monotonic() - started)
        return Ran(process.returncode, _last_bytes(out_file), _last_bytes(err_file), time.monotonic() - started)
