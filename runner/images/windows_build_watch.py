"""Watching a Windows build: what a lab sees while packer works for an hour, and what it keeps
when the build fails.

Packer's own output says little during its longest step ("Waiting for WinRM to become
available..." for the whole of Windows setup). BuildWatch follows that output and:
- names each phase (the ISO's boot, the boot keys, Windows setup, WinRM up, each provisioning
  script, the restart, the shutdown) with the time since the build began;
- captures the build VM's screen every minute (packer's VNC, whose port packer prints), the
  last ones kept, so a stuck setup shows where it stuck;
- once WinRM answers, copies Windows setup's logs (Panther) out of the guest;
- on failure, keeps all of it with packer's log in one folder beside the catalog.
Everything it does is best effort: a screen it cannot capture never fails a build.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

SCREEN_EVERY_S = 60.0
SCREENS_KEPT = 30
PANTHER_LOGS = (r"C:\Windows\Panther\setupact.log", r"C:\Windows\Panther\setuperr.log",
                r"C:\Windows\Panther\UnattendGC\setupact.log")

# Packer's step lines (after "==> qemu.windows-11: "), by their start, and the phase each begins.
PHASES = (
    ("Starting VM, booting from CD-ROM", "booting the ISO"),
    ("Typing the boot command", "pressing keys at the CD's 'Press any key' prompt"),
    ("Waiting for WinRM to become available", "Windows setup (waiting for WinRM)"),
    ("Connected to WinRM!", "WinRM answers"),
    ("Provisioning with powershell script: ", "provisioning: "),
    ("Uploading ", "uploading "),
    ("Restarting Machine", "restarting"),
    ("Gracefully halting virtual machine", "shutting down"),
    ("Timeout waiting for WinRM", "gave up waiting for WinRM"),
)


def build_phase(step: str) -> str | None:
    """The phase a packer step line begins, named for a person; None for any other line."""
    for start, phase in PHASES:
        if step.startswith(start):
            if phase.endswith(" "):  # the phase names the script or file the step names
                rest = step[len(start):].strip()
                return phase + (Path(rest.replace("\\", "/")).name if phase.startswith("provisioning") else rest)
            return phase
    return None


def packer_step(line: str) -> str | None:
    """The text of one of packer's step lines ("==> qemu.windows-11: Waiting for WinRM..."), or None."""
    if "==>" not in line:
        return None
    text = line.split("==>", 1)[1].strip()
    return text.split(": ", 1)[1] if text.startswith("qemu.") and ": " in text else text


class BuildWatch:
    """Feed every line of packer's output to line(); call finish() when packer has ended."""

    def __init__(self, work: Path, progress: Callable[[str], None], *,
                 open_screen: Callable[[int], object], fetch_panther: Callable[[Path], None],
                 screen_every: float = SCREEN_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        """OPEN_SCREEN(port) returns a Display of the build VM's VNC; FETCH_PANTHER(dest) copies
        setup's logs into DEST once WinRM answers. Both are the seams a test stands in for."""
        self.work = work
        self.progress = progress
        self.vnc_port: int | None = None  # from packer's "vnc://127.0.0.1:DISPLAY" line
        self._open_screen = open_screen
        self._fetch_panther = fetch_panther
        self._screen_every = screen_every
        self._clock = clock
        self._started = clock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.screens = work / "screens"
        self.panther = work / "panther"
        self.phases: list[tuple[float, str]] = []

    def elapsed(self, since_start: float | None = None) -> str:
        seconds = int(self._clock() - self._started if since_start is None else since_start)
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def line(self, text: str) -> str | None:
        """The progress line for one line of packer's output, or None; starts the screen
        captures when the VM boots and the Panther copy when WinRM answers."""
        if (vnc := re.search(r"vnc://127\.0\.0\.1:(\d+)", text)) is not None:
            self.vnc_port = 5900 + int(vnc.group(1))
            self.progress(f"the build VM's screen: vnc://127.0.0.1:{self.vnc_port} (no password)")
        step = packer_step(text)
        if step is None:
            return None
        now = self._clock() - self._started
        phase = build_phase(step)
        if phase is None:
            return f"[{self.elapsed(now)}] {step}"
        self.phases.append((now, phase))
        if phase == "booting the ISO":
            self._start(self._capture_screens, "build-screens")
        elif phase == "WinRM answers":
            self._start(self._copy_panther, "build-panther")
        return f"[{self.elapsed(now)}] {phase}"

    def finish(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def keep(self, dest: Path, packer_log: Path) -> Path:
        """Copies what shows why the build failed into DEST (made afresh): packer's log, the
        screens, the serial log and setup's logs, whichever exist."""
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for source in (packer_log, self.work / "serial.log", self.screens, self.panther):
            if source.is_dir():
                shutil.copytree(source, dest / source.name)
            elif source.is_file():
                shutil.copy(source, dest / source.name)
        return dest

    def _start(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _capture_screens(self) -> None:
        display = None
        while not self._stop.is_set():
            try:
                if display is None and self.vnc_port is not None:
                    display = self._open_screen(self.vnc_port)
                if display is None:
                    self._stop.wait(1.0)
                    continue
                png = display.screenshot()  # type: ignore[attr-defined]
                self.screens.mkdir(parents=True, exist_ok=True)
                (self.screens / f"{self.elapsed().replace(':', '-')}.png").write_bytes(png)
                for old in sorted(self.screens.glob("*.png"))[:-SCREENS_KEPT]:
                    old.unlink()
            except Exception as exc:  # noqa: BLE001 - a screen not captured never fails the build
                log.info("no screen of the build VM this time: %s", exc)
                display = None
            self._stop.wait(self._screen_every)
        if display is not None:
            try:
                display.close()  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - the VM may already be gone
                pass

    def _copy_panther(self) -> None:
        try:
            self.panther.mkdir(exist_ok=True)
            self._fetch_panther(self.panther)
            self.progress(f"[{self.elapsed()}] kept Windows setup's logs (Panther)")
        except Exception as exc:  # noqa: BLE001 - setup's logs are a help, not a step of the build
            self.progress(f"[{self.elapsed()}] could not copy Windows setup's logs: {exc}")


def fetch_panther_logs(shell, dest: Path) -> None:
    """Copies each of PANTHER_LOGS that exists through SHELL (a WinRmShell as the build's admin)."""
    for remote in PANTHER_LOGS:
        present = shell.run(f"if (Test-Path -LiteralPath '{remote}') {{ exit 0 }} else {{ exit 1 }}", timeout=60)
        if present.ok:
            shell.get(remote, dest / remote.split("\\", 2)[2].replace("\\", "_"))
