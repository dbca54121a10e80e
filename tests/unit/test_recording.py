"""Screen recordings: frames from the capture path become an H.264 mp4 that ffprobe reads, and a
recorder that fails says so and never raises."""

import io
import json
import shutil
import subprocess
import time

import pytest
from PIL import Image

from runner.records.recording import Recorder

pytestmark = pytest.mark.skipif(shutil.which("ffprobe") is None, reason="ffmpeg is not installed")


class ChangingScreen:
    """A fake capture: a 1280x800 desktop whose colour moves on with every frame."""

    def __init__(self) -> None:
        self.frames = 0

    def __call__(self) -> bytes:
        self.frames += 1
        buffer = io.BytesIO()
        Image.new("RGB", (1280, 800), (31, 111, (self.frames * 40) % 256)).save(buffer, format="PNG")
        return buffer.getvalue()


def probe(path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=codec_name,width,height:format=duration", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def test_a_recording_is_h264_at_the_screens_size_and_as_long_as_it_ran(tmp_path):
    screen = ChangingScreen()
    with Recorder(screen, tmp_path, fps=4):
        time.sleep(1.6)
    info = probe(tmp_path / "recording.mp4")
    stream = info["streams"][0]
    assert (stream["codec_name"], stream["width"], stream["height"]) == ("h264", 1280, 800)
    assert float(info["format"]["duration"]) > 1.0 and screen.frames >= 6
    assert not (tmp_path / "recording-error.txt").exists()


def test_a_failing_capture_is_reported_and_never_raises(tmp_path):
    def broken() -> bytes:
        raise OSError("the screen went away")

    with Recorder(broken, tmp_path):
        time.sleep(0.3)
    assert "the screen went away" in (tmp_path / "recording-error.txt").read_text()


def test_without_ffmpeg_the_episode_goes_on_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with Recorder(ChangingScreen(), tmp_path):
        pass
    assert "ffmpeg is not installed" in (tmp_path / "recording-error.txt").read_text()
