"""The live view on real VMs: a run of two linux-core tasks at pool 2 with --live
--live-control --record. Headless Chromium shows a tile per slot with the guest's desktop;
a person's click and keys through noVNC land in the guest (the desktop turns red and a file
appears in the write set) and are recorded as an intervention; every episode has a
recording; the run exports to an Inspect log that inspect_ai reads back."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request

from PIL import Image

from browser import Chromium
from runner.scoring.safety import read_trajectory
from vmtools import cu_run, wait_for

TASKS = ("calc-to-file", "env-var")
DESKTOP = (0x1F, 0x6F, 0x8B)  # linux-test's desktop colour
HUMAN_FILE = "/home/cu/human-was-here"


def share_of(png: bytes, colour: tuple[int, int, int]) -> float:
    data = Image.open(io.BytesIO(png)).convert("RGB").resize((160, 100)).tobytes()
    pixels = [data[i:i + 3] for i in range(0, len(data), 3)]
    return sum(1 for p in pixels if all(abs(a - b) <= 12 for a, b in zip(p, colour, strict=False))) / len(pixels)


def canvas_share_js(selector: str, colour: tuple[int, int, int]) -> str:
    """JavaScript for the share of the canvas at SELECTOR that shows COLOUR (within 12 a channel)."""
    return f"""(() => {{
        const c = document.querySelector('{selector}');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let hits = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - {colour[0]}) <= 12 && Math.abs(d[i + 1] - {colour[1]}) <= 12
                && Math.abs(d[i + 2] - {colour[2]}) <= 12) hits++;
        return hits / (d.length / 4); }})()"""


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


class LiveRun:
    """`cu-run run ... --live` in the background, its stderr read as it comes."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "runner", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "400"})
        self.stderr: list[str] = []
        self.stdout = ""
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def url(self) -> str:
        line = wait_for(lambda: next((l for l in self.stderr if l.startswith("live: ")), None), 600,
                        "the live: line")
        return line.removeprefix("live: ").strip()

    def status(self, base: str, token: str) -> dict:
        return json.loads(fetch(f"{base}/api/status?token={token}")[1])


def test_a_live_run_shows_its_slots_lets_a_person_take_over_and_records_everything(linux_image, tmp_path):
    out, stop = tmp_path / "run", tmp_path / "stop"
    # The agent waits for the test to say it is done: the episodes stay up while the page is looked at.
    waiter = f"sh -c 'while [ ! -e {stop} ]; do sleep 0.2; done'"
    run = LiveRun("run", "--suite", "linux-core", "--tasks", ",".join(TASKS), "--vm-pool", "2", "--agent", "command",
                  "--agent-cmd", waiter, "--live", "--live-control", "--record", "--out", str(out))
    try:
        url = run.url()
        base, token = url.split("/?token=")
        assert base.startswith("http://127.0.0.1:")
        assert fetch(f"{base}/api/status")[0] == 401 and fetch(f"{base}/?token=wrong")[0] == 401

        status = wait_for(lambda: (s := run.status(base, token)) and len(s["slots"]) == 2
                          and all(x["phase"].startswith("agent") for x in s["slots"]) and s, 600,
                          "both slots running their agent")
        assert {x["task_id"] for x in status["slots"]} == set(TASKS) and status["total"] == 2
        assert set(status["slots"][0]) == {"slot", "task_id", "trial", "phase", "elapsed_s"}
        slot = next(x["slot"] for x in status["slots"] if x["task_id"] == "calc-to-file")

        with Chromium(tmp_path / "chromium") as browser:
            page = browser.open(url)
            page.wait_for("document.querySelectorAll('.tile canvas[data-frames]').length == 2")
            for n in (0, 1):  # each tile's canvas shows that guest's desktop
                share = page.eval(canvas_share_js(f'.tile[data-slot="{n}"] canvas', DESKTOP))
                assert share > 0.15, f"tile {n}: {share:.2f} of it shows the desktop colour"

            # The full-size view of one slot, with control: click into its terminal and type.
            view = browser.open(f"{base}/view/{slot}?token={token}")
            view.wait_for("document.body.dataset.state == 'connected'")
            view.wait_for("document.querySelector('#screen canvas').getContext('2d')"
                          ".getImageData(1000, 600, 1, 1).data[3] > 0")  # the first picture is drawn
            x, y = view.eval("(() => { const r = document.querySelector('#screen canvas').getBoundingClientRect();"
                             " return [r.x, r.y]; })()")
            view.click(x + 300, y + 150)  # the terminal (xterm at +40+40)
            # Red only once the file is there (the test browser types no "&").
            view.type(f"touch {HUMAN_FILE}; if test -e {HUMAN_FILE}; then xsetroot -solid red; fi\n")
            # Landed: the guest's own desktop turns red, as the live view's screen of that slot shows.
            wait_for(lambda: share_of(fetch(f"{base}/api/screen/{slot}.png?token={token}")[1], (255, 0, 0)) > 0.15,
                     120, "the desktop to turn red")
            other = 1 - slot
            assert share_of(fetch(f"{base}/api/screen/{other}.png?token={token}")[1], DESKTOP) > 0.15
    finally:
        stop.touch()
        run.stdout, _ = run.proc.communicate(timeout=900)
    stderr = "".join(run.stderr)
    assert run.proc.returncode in (0, 1, 4), stderr[-4000:]  # both fail their verifier; that is not the point
    assert sum(1 for line in run.stderr if line.startswith("live: ")) == 1

    records = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(records) == set(TASKS)
    assert records["calc-to-file"]["intervened"] is True and records["env-var"]["intervened"] is False
    human = [e["arguments"] for e in read_trajectory(out / "calc-to-file" / "1" / "trajectory.jsonl")
             if e.get("intervention")]
    pressed = [e for e in human if e.get("buttons") == 1]
    assert pressed and abs(pressed[0]["x"] - 300) <= 1 and abs(pressed[0]["y"] - 150) <= 1  # the page's half pixels
    assert any(e.get("keysym") == 0xFF0D and e["down"] for e in human)  # Enter
    assert not any(e.get("intervention") for e in read_trajectory(out / "env-var" / "1" / "trajectory.jsonl"))
    # The guest's own listing saw the file the person made.
    changes = json.loads((out / "calc-to-file" / "1" / "write-set.json").read_text())["changes"]
    assert any(HUMAN_FILE in c for c in changes), changes
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["intervened"] == 1
    assert "intervened: a person used the mouse or keyboard" in (out / "report.html").read_text()

    for task in TASKS:  # --record: H.264 at the guest's size, longer than a second
        probe = json.loads(subprocess.run(
            ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height",
             "-show_entries", "format=duration", "-of", "json", str(out / task / "1" / "recording.mp4")],
            capture_output=True, text=True, check=True).stdout)
        stream = probe["streams"][0]
        assert (stream["codec_name"], stream["width"], stream["height"]) == ("h264", 1280, 800)
        assert float(probe["format"]["duration"]) > 1.0

    exported = cu_run("export", "inspect", str(out), "--out", str(tmp_path / "live.eval"))
    assert exported.returncode == 0, exported.stderr
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(tmp_path / "live.eval"))
    samples = {s.metadata["task_id"]: s for s in log.samples}
    assert set(samples) == set(TASKS)
    for task, sample in samples.items():
        assert sample.metadata["outcome"] == records[task]["outcome"]
        assert sample.metadata["intervened"] == records[task]["intervened"]
    assert any(e.id.startswith("human-") for e in samples["calc-to-file"].events)
    # As a person opens it: inspect view shows the episode's first screen atop the sample's
    # transcript (the viewer renders only what is in view).
    from headless_page import images_in_inspect_view

    assert images_in_inspect_view(tmp_path, "live.eval", "calc-to-file") >= 1
