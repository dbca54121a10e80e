"""The privileged prelude's as_user (guest_agent/linux/privileged-prelude.sh), run here with sh as
root against this host's `nobody`: in verify, what it starts sees every filesystem read-only, in a
mount namespace of its own, so code of the agent's it runs (a ~/.profile) cannot change what the
verifier reads next; in setup and collect the user's programs may write."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from runner.profiles import DesktopUser, get_profile

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("runuser"),
                                reason="runs as_user as root against this host's nobody")


def as_user(phase: str, home: Path, command: str) -> subprocess.CompletedProcess:
    prelude = get_profile("linux").scripts.privileged_prelude("/nonexistent-task", DesktopUser("nobody", str(home)),
                                                              phase)  # type: ignore[arg-type]
    return subprocess.run(["sh", "-c", prelude + f"as_user sh -c {command!r}\necho \"as_user: $?\"\n"],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def home():
    # Where nobody can reach it: pytest's own folders are root's alone.
    home = Path(tempfile.mkdtemp(prefix="cu-as-user-home-", dir="/tmp"))
    home.chmod(0o755)
    (home / "answer").write_text("nope\n")
    shutil.chown(home, "nobody")
    shutil.chown(home / "answer", "nobody")
    yield home
    shutil.rmtree(home)
    for leftover in [*Path("/tmp").glob("cu-as-user-probe-*"), *Path("/dev/shm").glob("cu-as-user-probe-*")]:
        leftover.unlink()


def test_in_verify_what_as_user_runs_writes_nowhere_and_reads_all(home):
    ran = as_user("verify", home, f'cat {home}/answer; echo done > {home}/answer; '
                                  'echo x > /tmp/cu-as-user-probe-$$; echo x > /dev/shm/cu-as-user-probe-$$; id -un')
    assert ran.stdout.startswith("nope\n") and "nobody\n" in ran.stdout, ran
    assert ran.stderr.count("Read-only file system") == 3, ran.stderr
    assert (home / "answer").read_text() == "nope\n" and not list(Path("/tmp").glob("cu-as-user-probe-*"))
    # Outside its namespace nothing was made read-only.
    assert "/ ro," not in Path("/proc/self/mounts").read_text().replace(" / ext4 ro,", "")


@pytest.mark.parametrize("phase", ["setup", "collect"])
def test_in_setup_and_collect_the_users_programs_may_write(home, phase):
    ran = as_user(phase, home, f"echo done > {home}/answer")
    assert ran.stdout.endswith("as_user: 0\n"), ran
    assert (home / "answer").read_text() == "done\n"
