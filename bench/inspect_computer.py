"""Inspect's computer() tool, two ways on one linux-test VM, side by side in one run:

- served: the `cu-run` sandbox answers the tool's command from the VM's VNC display on the host
  (what cu-run keeps: runner.sandbox.computer);
- in the guest: xdotool run as the desktop user over its SSH login, the way Inspect's own tool
  image works inside a container.

    python bench/inspect_computer.py [--n 20]

Speed: a pointer move and a key press each way, and the served tool's whole action (the move,
the settle, the screenshot it returns) and screenshot. Faithfulness: where the pointer lands
(the X server's own answer, xdotool getmouselocation) against where it was sent. linux-test has
no in-guest screen grabber (no xwd, ImageMagick, PIL or Gdk), so the in-guest screenshot is not
measured: an image would need more packages for it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.sandbox.computer import COMPUTER_TOOL
from runner.sandbox.provider import CuRunSandbox
from runner.sandbox.task_vms import CuRunSandboxConfig, TaskVMs

XDOTOOL = "DISPLAY=:0 XAUTHORITY=$HOME/.Xauthority xdotool"


async def measure(sandbox: CuRunSandbox, n: int) -> dict:
    rng = random.Random(7)
    points = [(rng.randrange(20, 1000), rng.randrange(20, 740)) for _ in range(n)]
    shell = sandbox.episode.user_shell
    display = sandbox.episode.vm.display

    def where() -> tuple[int, int]:
        out = shell.run(f"{XDOTOOL} getmouselocation --shell").stdout
        values = dict(line.split("=", 1) for line in out.split() if "=" in line)
        return int(values["X"]), int(values["Y"])

    times: dict[str, list[float]] = {k: [] for k in ("vnc_move", "xdotool_move", "vnc_key", "xdotool_key",
                                                     "served_mouse_move_action", "served_screenshot")}
    misses: dict[str, list[int]] = {"vnc": [], "xdotool": []}
    for x, y in points:
        t = time.perf_counter()
        display.move(x, y)
        times["vnc_move"].append(time.perf_counter() - t)
        landed = where()
        misses["vnc"].append(max(abs(landed[0] - x), abs(landed[1] - y)))
        t = time.perf_counter()
        shell.run(f"{XDOTOOL} mousemove {x} {y}")
        times["xdotool_move"].append(time.perf_counter() - t)
        landed = where()
        misses["xdotool"].append(max(abs(landed[0] - x), abs(landed[1] - y)))
        t = time.perf_counter()
        display.key("shift")
        times["vnc_key"].append(time.perf_counter() - t)
        t = time.perf_counter()
        shell.run(f"{XDOTOOL} key shift")
        times["xdotool_key"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await sandbox.exec(["python3", COMPUTER_TOOL, "mouse_move", "--coordinate", str(x), str(y)])
        times["served_mouse_move_action"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await sandbox.exec(["python3", COMPUTER_TOOL, "screenshot"])
        times["served_screenshot"].append(time.perf_counter() - t)
    return {"timings": {k: summarize(v) for k, v in times.items()},
            "pointer_miss_px": {k: {"max": max(v), "exact": sum(1 for m in v if m == 0), "n": len(v)}
                                for k, v in misses.items()},
            "xdotool_over_vnc_move": round(summarize(times["xdotool_move"])["median_s"]
                                           / summarize(times["vnc_move"])["median_s"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    options = CuRunSandboxConfig(image="linux-test")
    vms = TaskVMs.open(options, lambda line: print(line, file=sys.stderr))
    episode, slot = vms.start_episode({}, lambda line: print(line, file=sys.stderr))
    try:
        result = anyio.run(measure, CuRunSandbox(episode, slot, ("bench", options)), args.n)
    finally:
        vms.end_episode(slot, interrupted=False)
        vms.close()
    emit("inspect_computer", {"n": args.n, **result})


if __name__ == "__main__":
    main()
