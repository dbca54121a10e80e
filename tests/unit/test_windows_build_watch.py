"""BuildWatch: the phases a lab sees during a Windows build, the build VM's screens, setup's logs
copied once WinRM answers (through WinRmShell, against the fake WS-Man server), and what a failed
build keeps. The real packer and a real VNC screen are exercised by
tests/e2e/test_windows_packer_boot.py."""

import threading

import pytest
from fakes.wsman import FakeWsmanServer, Reply

from runner.guest.winrm import WinRmShell
from runner.images.windows_build_watch import BuildWatch, build_phase, fetch_panther_logs, packer_step

PACKER_LINES = [
    ("==> qemu.windows-11: Starting VM, booting from CD-ROM", "booting the ISO"),
    ("==> qemu.windows-11: Typing the boot command over VNC...", "pressing keys at the CD's 'Press any key' prompt"),
    ("==> qemu.windows-11: Waiting for WinRM to become available...", "Windows setup (waiting for WinRM)"),
    ("==> qemu.windows-11: Connected to WinRM!", "WinRM answers"),
    ("==> qemu.windows-11: Provisioning with powershell script: /work/packer/windows-11/scripts/install-python.ps1",
     "provisioning: install-python.ps1"),
    ("==> qemu.windows-11: Restarting Machine", "restarting"),
    ("==> qemu.windows-11: Gracefully halting virtual machine...", "shutting down"),
]


@pytest.mark.parametrize("line, phase", PACKER_LINES)
def test_each_packer_step_names_its_phase(line, phase):
    assert build_phase(packer_step(line)) == phase


def test_other_lines_are_not_phases():
    assert packer_step("2026/12/04 18:10:42 packer-builder-qemu plugin: Qemu path") is None
    assert build_phase(packer_step("==> qemu.windows-11: Deleting output directory...")) is None


class FakeScreen:
    def __init__(self):
        self.closed = False

    def screenshot(self):
        return b"\x89PNG stand-in"

    def close(self):
        self.closed = True


def test_the_watch_times_the_phases_captures_screens_and_keeps_them_on_failure(tmp_path):
    clock = iter(float(t) for t in range(0, 10_000, 61))
    shown, fetched, screens = [], threading.Event(), []

    def open_screen(port):
        assert port == 5976
        screens.append(FakeScreen())
        return screens[-1]

    def fetch(dest):
        (dest / "setupact.log").write_text("setup ran")
        fetched.set()

    watch = BuildWatch(tmp_path / "work", shown.append, open_screen=open_screen, fetch_panther=fetch,
                       screen_every=0.05, clock=lambda: next(clock))
    (tmp_path / "work").mkdir()
    assert watch.line("    qemu.windows-11: vnc://127.0.0.1:76") is None and watch.vnc_port == 5976
    lines = [watch.line(line) for line, _phase in PACKER_LINES[:4]]
    assert lines[0].startswith("[0:01:01] booting the ISO") and lines[3].endswith("WinRM answers")
    assert fetched.wait(10)
    watch.finish()
    assert screens and all(s.closed for s in screens)
    (tmp_path / "work" / "packer.log").write_text("packer said")
    kept = watch.keep(tmp_path / ".build-windows-11.failed", tmp_path / "work" / "packer.log")
    assert (kept / "packer.log").read_text() == "packer said"
    assert (kept / "panther" / "setupact.log").read_text() == "setup ran"
    assert list((kept / "screens").glob("*.png"))
    assert any("kept Windows setup's logs" in line for line in shown)


def test_setup_logs_come_out_through_winrm_as_the_build_admin(tmp_path):
    server = FakeWsmanServer()
    server.files[r"C:\Windows\Panther\setupact.log"] = b"2026-12-04 Info Setup finished\r\n"
    server.handler = lambda text: Reply(exit_code=0 if "setupact.log'" in text and "UnattendGC" not in text else 1)
    try:
        fetch_panther_logs(WinRmShell("127.0.0.1", server.port, "cu", "secret"), tmp_path)
    finally:
        server.close()
    assert (tmp_path / "Panther_setupact.log").read_bytes() == b"2026-12-04 Info Setup finished\r\n"
    assert not (tmp_path / "Panther_setuperr.log").exists()
