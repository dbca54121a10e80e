"""Capture over VNC alone (`mcp --attach`): a full refresh per screenshot against the background
mirror (runner/display/vnc_mirror.py), interleaved on one warm linux-test VM.

    python bench/attach_capture.py [--rounds 30]

Two cases per round and path: a screenshot of a still screen, and a screenshot right after a
key typed into the terminal (the mirror then waits for the frame that shows it). After the
rounds both paths capture the settled screen and are compared pixel for pixel. Prints JSON.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

from PIL import Image, ImageChops

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.config import Settings
from runner.display.vnc import VncDisplay
from runner.display.vnc_mirror import VncMirror
from runner.runs.session import open_vm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    with open_vm(Settings.resolve(), "linux-test") as vm:
        host, port = vm.endpoints.vnc.rsplit(":", 1)
        full = VncDisplay(host, int(port), password=vm.vnc_password, pointer_offset=1)
        fast = VncDisplay(host, int(port), password=vm.vnc_password, pointer_offset=1)
        mirror = VncMirror(host, int(port), vm.vnc_password, last_input=lambda: fast.input_at)
        fast.use_capture(mirror.capture)
        full.click(200, 150)  # the terminal has the keyboard
        time.sleep(1)
        samples: dict[str, list[float]] = {k: [] for k in ("full_still", "mirror_still", "full_after_key",
                                                           "mirror_after_key")}
        for _ in range(args.rounds):
            for name, display in (("full", full), ("mirror", fast)):
                t = time.perf_counter()
                display.screenshot()
                samples[f"{name}_still"].append(time.perf_counter() - t)
                display.type("a")
                t = time.perf_counter()
                display.screenshot()
                samples[f"{name}_after_key"].append(time.perf_counter() - t)
        full.key("u", ("ctrl",))  # clear the typed line
        time.sleep(1.5)
        a = Image.open(io.BytesIO(full.screenshot())).convert("RGB")
        b = Image.open(io.BytesIO(fast.screenshot())).convert("RGB")
        red, green, blue = ImageChops.difference(a, b).split()
        changed = ImageChops.lighter(ImageChops.lighter(red, green), blue)  # per pixel, the largest difference
        differing = changed.width * changed.height - changed.histogram()[0]
        mirror.close()
        full.close()
        fast.close()
    results = {k: summarize(v) for k, v in samples.items()}
    emit("attach_capture", {
        "rounds": args.rounds, "capture": results,
        "speedup_still": round(results["full_still"]["median_s"] / results["mirror_still"]["median_s"], 2),
        "speedup_after_key": round(results["full_after_key"]["median_s"] / results["mirror_after_key"]["median_s"], 2),
        "settled_frames_differing_pixels": differing,
    })


if __name__ == "__main__":
    main()
