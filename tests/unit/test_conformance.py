"""The fakes the unit tests stand on pass the same conformance checks as the real backends
(runner/vm/selfcheck.py; the e2e tests run them on real VMs): LocalShell and FakeDisplay, and the
recording proxies of the MCP server around them. A fake that drifts from the contract would let
a unit test pass that the real backend fails."""

from __future__ import annotations

import secrets

import pytest

from fakes.display import FakeDisplay, LocalShell
from fakes.profiles import host_folders
from runner.profiles.linux import LinuxProbes
from runner.mcp.trajectory import RecordingDisplay, RecordingShell, Trajectory
from runner.vm.selfcheck import run_display_checks, run_shell_checks

DESKTOP = "#1f6f8b"  # FakeDisplay's background


class HostProbes(LinuxProbes):
    """The linux profile's own checks, with a sleeper of its own: this host runs other sleeps."""

    def __init__(self, root) -> None:
        self.root = root
        self.marker = f"{60 + secrets.randbelow(1000) / 1000:.3f}"

    def selfcheck_sleep(self) -> tuple[str, str]:
        return f"sleep {self.marker}", f"pgrep -f 'sleep {self.marker}' || true"

    def selfcheck_temp_path(self) -> str:
        return str(self.root / "roundtrip.bin")


@pytest.mark.parametrize("wrap", ["plain", "recorded"])
def test_local_shell_passes_the_guest_shell_checks(tmp_path, wrap):
    guest = host_folders(tmp_path, "linux-conformance", HostProbes(tmp_path))
    shell = LocalShell() if wrap == "plain" else RecordingShell(LocalShell(), Trajectory(None))
    results = run_shell_checks(shell, guest)
    assert [r.name for r in results] == ["exec", "exec timeout", "file round trip"]
    assert all(r.ok for r in results), results


@pytest.mark.parametrize("wrap", ["plain", "recorded"])
def test_fake_display_passes_the_display_checks(wrap):
    fake = FakeDisplay(1280, 800)
    display = fake if wrap == "plain" else RecordingDisplay(fake, Trajectory(None))
    results = run_display_checks(display, (1280, 800), DESKTOP, click_at=(1000, 500), pointer=lambda: fake.pointer)
    assert all(r.ok for r in results), results


def test_the_checks_can_fail():
    fake = FakeDisplay(320, 200)
    results = run_display_checks(fake, (1280, 800), DESKTOP, click_at=(10, 10), pointer=lambda: (0, 0))
    assert [r.ok for r in results] == [False, False]
    assert "screenshot is (320, 200)" in results[0].detail and "pointer is at (0, 0)" in results[1].detail
