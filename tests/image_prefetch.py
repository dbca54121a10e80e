"""The e2e tests' images, built beside the unit tests.

The unit tests run first and keep one of the two cores busy for ~3 minutes. On an empty cache
each image is built from Debian's mirror (mmdebstrap, 2 to 3 minutes each), and that mostly
needs the other core and the network. So when a session will boot VMs, `cu-run image build`
runs for each image its tests ask for, one after the other, in a process of its own, while the
unit tests run. A fixture that needs an image waits for that build, then finds the image in the
cache (build_image reuses it). On a filled cache each build returns in seconds.

    prefetch = ImagePrefetch(["linux-test", "linux-desktop"], log_dir)
    prefetch.start()
    prefetch.wait("linux-test")  # in the fixture, before build_image
    prefetch.stop()              # at the session's end: a build still going is interrupted
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

INTERRUPT_GRACE_S = 30.0  # a build interrupted removes its scratch folder before it exits


def cu_run_image_build(name: str) -> list[str]:
    return [sys.executable, "-m", "runner", "image", "build", name]


class ImagePrefetch:
    def __init__(self, names: list[str], log_dir: Path,
                 command: Callable[[str], list[str]] = cu_run_image_build) -> None:
        self.names = names
        self.log_dir = log_dir
        self.command = command
        self.build_s: dict[str, float] = {}  # how long each build took, beside the unit tests
        self.waited_s: dict[str, float] = {}  # how long a fixture then waited for it
        self.failed: dict[str, Path] = {}  # the log of each build that failed
        self.interrupted: list[str] = []  # builds stop() cut short
        self._done = {name: threading.Event() for name in names}
        self._proc: subprocess.Popen | None = None
        self._stopping = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._build_all, name="image-prefetch", daemon=True)

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def wait(self, name: str) -> None:
        """Returns once NAME's build has ended, well or not. A failed build is not raised here:
        the fixture's own build_image then tries again and reports the error in its own words."""
        if name not in self._done:
            return
        started = time.monotonic()
        self._done[name].wait()
        self.waited_s[name] = time.monotonic() - started

    def stop(self) -> None:
        """Interrupts a build still going (a unit test failed and no VM will boot), as Ctrl-C
        would: the build removes its scratch folder, and no mmdebstrap outlives the session."""
        with self._lock:
            self._stopping = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._thread.join(INTERRUPT_GRACE_S)

    def summary(self) -> str | None:
        if not self.build_s:
            return None
        built = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.build_s.items())
        waited = sum(self.waited_s.values())
        line = f"images built beside the unit tests: {built}; the e2e tests then waited {waited:.0f} s for them"
        for name, log in self.failed.items():
            line += f"\n{name}'s build beside the unit tests failed (log: {log}); its fixture then built it itself"
        for name in self.interrupted:
            line += f"\n{name}'s build beside the unit tests was interrupted: the session ended first"
        return line

    def _build_all(self) -> None:
        for name in self.names:
            try:
                self._build(name)
            finally:
                self._done[name].set()

    def _build(self, name: str) -> None:
        log = self.log_dir / f"prefetch-{name}.log"
        started = time.monotonic()
        with self._lock:
            if self._stopping:
                return
            with log.open("w") as out:
                # A session of its own: stop() interrupts the build and its mmdebstrap together.
                proc = self._proc = subprocess.Popen(self.command(name), stdin=subprocess.DEVNULL, stdout=out,
                                                     stderr=subprocess.STDOUT, start_new_session=True)
        code = proc.wait()
        self.build_s[name] = time.monotonic() - started
        if code != 0:
            with self._lock:
                if self._stopping:
                    self.interrupted.append(name)
                else:
                    self.failed[name] = log


PREFETCH = pytest.StashKey[ImagePrefetch]()  # the session's prefetch, if tests/conftest.py started one


def wait_for_prefetched(config: pytest.Config, name: str) -> None:
    """Called by an image fixture before it builds: the image may be on its way already."""
    if PREFETCH in config.stash:
        config.stash[PREFETCH].wait(name)
