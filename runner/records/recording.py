"""Screen recordings of episodes (`run --record`): recording.mp4 in each episode's folder.

A thread takes the screen through the capture path the episode already uses (libvirt's
screendump: nothing runs in the guest for it) at FPS frames a second and pipes the frames to
ffmpeg, which encodes H.264. The size is bounded three ways: few frames (2 a second), a
high constant-rate factor on a mostly still desktop, and ffmpeg's own file-size limit
(MAX_BYTES), past which it stops writing. A recorder that fails is logged and reported in
the episode folder; it never fails the episode.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

FPS = 2
MAX_BYTES = 64 * 2**20  # per recording: ffmpeg stops writing past it (-fs)
RECORDING = "recording.mp4"


class Recorder:
    """Records CAPTURE (PNG bytes) into FOLDER/recording.mp4 from start() to stop()."""

    def __init__(self, capture: Callable[[], bytes], folder: Path, fps: int = FPS) -> None:
        self.capture = capture
        self.path = folder / RECORDING
        self.problem_path = folder / "recording-error.txt"
        self.fps = fps
        self.frames = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ffmpeg: subprocess.Popen | None = None

    def start(self) -> Recorder:
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            self._fail("ffmpeg is not installed (scripts/setup-host.sh installs it)")
            return self
        self._ffmpeg = subprocess.Popen(
            [ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "image2pipe", "-framerate", str(self.fps),
             "-c:v", "png", "-i", "-", "-c:v", "libx264", "-preset", "ultrafast", "-crf", "32", "-pix_fmt", "yuv420p",
             "-fs", str(MAX_BYTES), "-movflags", "+faststart", str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._thread = threading.Thread(target=self._loop, name=f"recorder-{self.path.parent.name}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        period = 1 / self.fps
        next_at = time.monotonic()
        assert self._ffmpeg is not None and self._ffmpeg.stdin is not None
        while not self._stop.is_set():
            try:
                frame = self.capture()
                self._ffmpeg.stdin.write(frame)
                self.frames += 1
            except Exception as exc:  # noqa: BLE001 - a recorder never fails the episode
                self._fail(f"recording stopped after {self.frames} frames: {type(exc).__name__}: {exc}")
                return
            next_at += period
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        """Ends the recording and waits for ffmpeg to finish the file. Never raises."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._ffmpeg is None:
            return
        try:
            _, err = self._ffmpeg.communicate(timeout=60)  # closes ffmpeg's input: it finishes the file
            if self._ffmpeg.returncode != 0:
                self._fail(f"ffmpeg exited {self._ffmpeg.returncode}: {err.decode(errors='replace').strip()[-500:]}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._ffmpeg.kill()
            self._fail(f"ffmpeg did not finish the recording: {exc}")

    def _fail(self, why: str) -> None:
        log.warning("%s: %s", self.path, why)
        try:
            with self.problem_path.open("a") as f:  # every problem, in the order they came
                f.write(why + "\n")
        except OSError:
            pass

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
