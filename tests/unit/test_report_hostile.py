"""report.html and junit.xml from a run folder where one episode left the worst it could: a click at
x = 1e30, a NaN duration, a reason with controls, a lone surrogate and 10 MB of text, lines of its
trajectory that are not JSON, broken PNGs, a screenshot named outside its folder. The other
episode is shown whole, the hostile one is marked, and both files parse."""

import io
import json
import math
import struct
import xml.etree.ElementTree as ET
import zlib
from html.parser import HTMLParser

import pytest
from PIL import Image
from runfolders import write_results

from runner.records.report import render_html, render_junit, write_reports
from runner.records.results import EpisodeRecord, ResultLog, summarize

CALM_SHOTS = {"initial": (10, 20, 230), "final": (0, 200, 0), "step-0001": (255, 140, 0)}
WILD_SHOT = (40, 220, 220)
OUTSIDE = (250, 0, 250)  # a picture beside the run folder: no episode's
BIG = 10 * 2**20
HOSTILE_REASON = "bad\x00\x1b[31m \ud800 " + "A" * BIG + " tail"
CONTROLS = ("\x00", "\x1b", "\x01", "\ufffe")


def png_bytes(color, size=(1280, 800)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def bomb_png(width=60_000, height=60_000) -> bytes:
    """A PNG whose header claims WIDTH x HEIGHT pixels: a decoder that believes it runs out of memory."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def step(n, action, arguments, **more) -> dict:
    return {"step": n, "tool": f"computer_use_{action}", "action": action, "arguments": arguments, "result": "ok",
            "duration_s": 0.01, **more}


def calm_run(tmp_path):
    """A run folder of one ordinary episode: calm #1 passed."""
    run = tmp_path / "run"
    write_results(run, [EpisodeRecord("calm", 1, "pass", "", 12.0, 0, 1, "2026-12-01T10:00:00", "2026-12-01T10:00:12",
                                      {"agent": 5.0}, checkpoints={"saved": True})])
    (run / "run.json").write_text(json.dumps({"suite": {"name": "hostile", "tasks": ["calm", "wild"]},
                                              "agent": {"name": "scripted"}}))
    calm = run / "calm" / "1"
    calm.mkdir(parents=True)
    for name, color in CALM_SHOTS.items():
        (calm / f"{name}.png").write_bytes(png_bytes(color))
    (calm / "trajectory.jsonl").write_text("".join(json.dumps(s) + "\n" for s in [
        step(1, "screenshot", {}, screenshot="step-0001.png"),
        step(2, "click", {"x": 640, "y": 400, "button": "left"}),
        step(3, "type", {"text": "hello calm"})]))
    (calm / "verify.log").write_text("exit 0\n--- stdout\nPASS calm\n")
    return run


def hostile_run(tmp_path):
    """calm_run, and wild #1: it failed, and left everything out of range it could."""
    run = calm_run(tmp_path)
    ResultLog(run).append(EpisodeRecord(
        "wild", 1, "fail", HOSTILE_REASON, math.nan, 1, 1, "2026-12-01T10:00:00", "2026-12-01T10:00:12",
        {"agent": math.inf}, checkpoints={"\x00saved\ud800": False},
        violations=[{"rule": "no-rm", "step": 3, "detail": "\x1b[2J" + "B" * BIG}],
        changed=["/home/cu/'><img src=x onerror=alert(1)>"]))
    wild = run / "wild" / "1"
    wild.mkdir(parents=True)
    (tmp_path / "outside.png").write_bytes(png_bytes(OUTSIDE))
    (wild / "initial.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 5)
    (wild / "step-0001.png").write_bytes(png_bytes(WILD_SHOT))
    good = png_bytes((1, 2, 3))
    (wild / "step-0002.png").write_bytes(good[: len(good) // 2])  # a PNG cut in the middle
    (wild / "step-0003.png").write_bytes(bomb_png())
    (wild / "x' onerror='alert(1).png").write_bytes(png_bytes(OUTSIDE))
    lines = [json.dumps(s) for s in [
        step(1, "screenshot", {}, screenshot="step-0001.png"),
        step(2, "click", {"x": 1e30, "y": 5}),
        step(3, "click", {"x": 10**30, "y": 5}),
        step(4, "drag", {"x1": 1, "y1": 1, "x2": math.nan, "y2": math.inf}),
        step(5, "scroll", {"x": -4, "y": "400"}),
        step(6, "screenshot", {}, screenshot="step-0002.png"),
        step(7, "screenshot", {}, screenshot="step-0003.png"),
        step(8, "screenshot", {}, screenshot="../../../outside.png"),
        step(9, "screenshot", {}, screenshot=str(tmp_path / "outside.png")),
        step(10, "screenshot", {}, screenshot="x' onerror='alert(1).png"),
        step(11, "move", {"x": 3, "y": 4}, duration_s="slow", tool="<script>alert(1)</script>"),
        step(12, "type", {"text": "\x00\x1b\ud800" + "C" * 100_000}, result="\x1b[0m" * 1000, duration_s=math.nan),
    ]]
    lines[5:5] = ["this is not JSON", "[1, 2, 3]", '"a string"', "{" * 100_000]  # 4 lines that are no step
    # and 2 more: one not UTF-8, one of 2 MiB
    data = "\n".join(lines).encode() + b"\n\xff\xfe{\"step\": 13}\n" + b"D" * (2 * 2**20) + b"\n"
    (wild / "trajectory.jsonl").write_bytes(data)
    (wild / "verify.log").write_bytes(b"\x00\x1b[31m" + b"E" * BIG + b"\xff\xfe the end of the log")
    return run


class Page(HTMLParser):
    """The tags and attributes html.parser finds."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: list[str] = []
        self.ends: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.starts.append(tag)
        self.attrs += attrs

    def handle_endtag(self, tag):
        self.ends.append(tag)


def section(page: str, anchor: str) -> str:
    start = page.index(f"id='{anchor}'")
    return page[start:page.index("</details>", start)]


def images(html_text: str) -> list[Image.Image]:
    import base64
    import re

    return [Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
            for data in re.findall(r"src='data:image/jpeg;base64,([^']+)'", html_text)]


def shows(image: Image.Image, rgb) -> bool:
    colours = {c for _n, c in image.getcolors(maxcolors=1 << 20)}
    return any(all(abs(a - b) <= 12 for a, b in zip(c, rgb, strict=True)) for c in colours)


def assert_parses_as_html(page: str) -> Page:
    parsed = Page(page)
    assert "script" not in parsed.starts
    assert not [name for name, _value in parsed.attrs if name.startswith("on")]
    for tag in ("details", "summary", "div", "pre", "ul", "table"):
        assert parsed.starts.count(tag) == parsed.ends.count(tag), tag
    return parsed


def test_one_hostile_episode_leaves_both_reports_whole_and_marks_it(tmp_path):
    run = hostile_run(tmp_path)
    html_path, junit_path = write_reports(run)

    page = html_path.read_bytes().decode("utf-8", errors="strict")
    assert_parses_as_html(page)
    assert len(page) < 3_000_000 and not any(c in page for c in CONTROLS)

    calm = section(page, "calm-1")  # whole: screens, the step and the click drawn, phases, checkpoint, log
    shots = images(calm)
    assert len(shots) == 4
    assert shows(shots[0], CALM_SHOTS["initial"]) and shows(shots[1], CALM_SHOTS["final"])
    assert shows(shots[2], CALM_SHOTS["step-0001"]) and shows(shots[3], CALM_SHOTS["step-0001"])
    for text in ("phases: agent 5.0 s", "saved", "Trajectory (3 steps)", "hello calm", "PASS calm", "(12 s)"):
        assert text in calm, text
    assert "class='warn'" not in calm

    wild = section(page, "wild-1")
    # NaN, infinite and text durations: shown as not numbers
    assert "(? s)" in wild and "phases: agent ? s" in wild and "<i>ok</i> (? s)" in wild
    assert "its duration (nan) is not a number of seconds" in wild
    assert "more characters not shown" in wild and " tail" not in wild  # the 10 MB reason, cut
    assert "(1e+30, 5) is off the 1280x800 screen: not drawn" in wild
    assert f"({10**30}, 5) is off the 1280x800 screen" in wild
    assert "(1, 1, nan, inf) is off the" in wild and "(-4, 400) is off the" in wild
    assert "6 lines skipped: not a JSON object" in wild
    assert "Trajectory (12 steps)" in wild
    assert "screenshot step-0002.png: missing or unreadable" not in wild  # its header reads: a broken picture
    assert "(unreadable step-0002.png)" in wild and "(unreadable initial.png)" in wild
    assert "screenshot step-0003.png: missing or unreadable" in wild  # 60000 x 60000 pixels: never decoded
    assert "screenshot ../../../outside.png: missing or unreadable" in wild
    wild_shots = images(wild)
    assert [shows(i, WILD_SHOT) for i in wild_shots] == [True]  # step-0001 only: no click drawn, nothing outside
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in wild and "/home/cu/&#x27;&gt;&lt;img" in wild
    assert "the end of the log" in wild and "(its last 8000 characters, of " in wild
    summary = wild[:wild.index("</summary>")]
    assert "class='warn'" in summary and "off the screen" in summary and "not a JSON object" in summary

    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite.get("tests") == "2" and suite.get("failures") == "1" and math.isfinite(float(suite.get("time")))
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["calm trial 1"].find("failure") is None and cases["calm trial 1"].get("time") == "12.0"
    failed = cases["wild trial 1"]
    assert failed.get("time") == "0.0"
    message = failed.find("failure").get("message")
    assert message.startswith("bad\ufffd\ufffd[31m \ufffd AAA") and len(message) < 1200
    out = failed.find("system-out").text
    assert "violation no-rm" in out and "checkpoint \ufffdsaved\ufffd: fail" in out and len(out) < 5000
    assert not any(c in junit_path.read_text(encoding="utf-8") for c in CONTROLS)


def one_fault_run(tmp_path, steps=(), files=None, reason="no", duration_s=3.0):
    """calm_run, and wild #1 with a screenshot and one fault: STEPS (lines of its trajectory after
    the screenshot), FILES in its folder, or its record's REASON or DURATION_S."""
    run = calm_run(tmp_path)
    ResultLog(run).append(EpisodeRecord("wild", 1, "fail", reason, duration_s, 1, 1, "t0", "t1"))
    wild = run / "wild" / "1"
    wild.mkdir(parents=True)
    (tmp_path / "outside.png").write_bytes(png_bytes(OUTSIDE))
    (wild / "step-0001.png").write_bytes(png_bytes(WILD_SHOT))
    for name, data in (files or {}).items():
        (wild / name).write_bytes(data)
    first = json.dumps(step(1, "screenshot", {}, screenshot="step-0001.png")).encode()
    (wild / "trajectory.jsonl").write_bytes(b"\n".join([first, *steps]) + b"\n")
    return run


def line_of(n, action, arguments, **more) -> bytes:
    return json.dumps(step(n, action, arguments, **more)).encode()


def cut_png() -> bytes:
    data = png_bytes((1, 2, 3))
    return data[: len(data) // 2]


SHOT_2 = line_of(2, "screenshot", {}, screenshot="step-0002.png")
FAULTS = {  # one fault of the wild episode: (what one_fault_run is given, what its row then says)
    "a click at x = 1e30": ({"steps": [line_of(2, "click", {"x": 1e30, "y": 5})]}, "(1e+30, 5) is off the 1280x800"),
    "a click at x = 10**30": ({"steps": [line_of(2, "click", {"x": 10**30, "y": 5})]}, f"({10**30}, 5) is off the"),
    "a drag to NaN": ({"steps": [line_of(2, "drag", {"x1": 1, "y1": 1, "x2": math.nan, "y2": 2})]},
                      "(1, 1, nan, 2) is off the"),
    "a line that is not JSON": ({"steps": [b"PASS"]}, "1 line skipped: not a JSON object"),
    "a line that is a JSON list": ({"steps": [b"[1, 2]"]}, "1 line skipped: not a JSON object"),
    "a line that is not UTF-8": ({"steps": [b'\xff{"step": 2}']}, "1 line skipped: not a JSON object"),
    "a step whose duration is text": ({"steps": [line_of(2, "type", {"text": "x"}, duration_s="slow")]}, "(? s)"),
    "a PNG cut in the middle": ({"steps": [SHOT_2], "files": {"step-0002.png": cut_png()}},
                                "a picture that could not be read"),
    "a PNG of 60000 x 60000 pixels": ({"steps": [SHOT_2], "files": {"step-0002.png": bomb_png()}},
                                      "screenshot step-0002.png: missing or unreadable"),
    "a screenshot outside its folder": ({"steps": [line_of(2, "screenshot", {}, screenshot="../../../outside.png")]},
                                        "screenshot ../../../outside.png: missing or unreadable"),
    "a NaN duration": ({"duration_s": math.nan}, "its duration (nan) is not a number of seconds"),
    "a reason of 10 MB with controls": ({"reason": HOSTILE_REASON}, "more characters not shown"),
    "a log of 10 MB": ({"files": {"verify.log": b"\x1b" * BIG}}, "(its last 8000 characters, of 10485760 bytes)"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_alone_is_marked_on_its_row_and_spoils_nothing_else(tmp_path, fault):
    given, said = FAULTS[fault]
    html_path, junit_path = write_reports(one_fault_run(tmp_path, **given))
    page = html_path.read_bytes().decode("utf-8", errors="strict")
    assert_parses_as_html(page)
    assert len(page) < 1_000_000 and not any(c in page for c in CONTROLS)
    calm = section(page, "calm-1")
    assert len(images(calm)) == 4 and "PASS calm" in calm and "class='warn'" not in calm
    wild = section(page, "wild-1")
    assert said in wild
    if fault not in ("a log of 10 MB", "a reason of 10 MB with controls"):  # long is no fault: cut, and the cut said
        assert "class='warn'" in wild[:wild.index("</summary>")]
    assert not any(shows(i, OUTSIDE) for i in images(page))
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert [c.get("name") for c in suite.iter("testcase")] == ["calm trial 1", "wild trial 1"]
    assert all(math.isfinite(float(e.get("time"))) for e in suite.iter() if e.get("time"))
    assert len(junit_path.read_bytes()) < 10_000


def test_an_episode_that_cannot_be_rendered_is_a_row_that_says_so(tmp_path):
    """A value no reader expects (changed is a number) fails that episode's part of the page only."""
    run = calm_run(tmp_path)
    records = ResultLog(run).latest()
    broken = EpisodeRecord("wild", 2, "fail", "<b>no</b>", 1.0, 0, 1, "t0", "t1", changed=5)  # type: ignore[arg-type]
    records.append(broken)
    page = render_html(run, {}, summarize(records, ["calm", "wild"]), records)
    assert_parses_as_html(page)
    row = page[page.index("id='wild-2'"):].split("</p>")[0]
    assert "could not be rendered: TypeError" in row and "<span class='fail'>fail</span>" in row
    assert len(images(section(page, "calm-1"))) == 4 and "PASS calm" in page


def test_a_testcase_that_cannot_be_built_says_so_and_keeps_its_outcome(tmp_path):
    records = [EpisodeRecord("calm", 1, "pass", "", 12.0, 0, 1, "t0", "t1", checkpoints={"saved": True}),
               EpisodeRecord("wild", 1, "timeout", "slow", 1.0, 0, 1, "t0", "t1", checkpoints=None)]  # type: ignore[arg-type]
    root = ET.fromstring(render_junit({"suite": {"name": "s"}}, records).encode())
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["calm trial 1"].find("system-out").text == "checkpoint saved: pass"
    failure = cases["wild trial 1"].find("failure")
    assert failure.get("type") == "timeout" and failure.get("message").startswith("could not be rendered: ")
    assert root.find("testsuite").get("failures") == "1"


def test_one_report_that_fails_leaves_the_other_written_and_no_part_file(tmp_path, monkeypatch):
    import runner.records.report as report

    run = calm_run(tmp_path)

    def fails(*_args):
        raise RuntimeError("rendering failed")

    for broken, kept, written in (("render_html", "report.html", "junit.xml"),
                                  ("render_junit", "junit.xml", "report.html")):
        (run / "report.html").write_text("the last report")
        (run / "junit.xml").write_text("the last junit")
        with monkeypatch.context() as patch:
            patch.setattr(report, broken, fails)
            with pytest.raises(RuntimeError, match="rendering failed"):
                write_reports(run)
        assert (run / kept).read_text().startswith("the last"), broken  # untouched: never half a file
        assert "calm" in (run / written).read_text(), broken
        assert sorted(p.name for p in run.iterdir() if p.is_file()) == ["junit.xml", "report.html", "results.jsonl",
                                                                         "run.json"]


def test_results_lines_of_the_wrong_types_are_skipped_not_fatal(tmp_path):
    run = calm_run(tmp_path)
    with (run / "results.jsonl").open("a") as f:
        f.write(json.dumps({**json.loads((run / "results.jsonl").read_text().split("\n")[0]), "trial": "1"}) + "\n")
        f.write(json.dumps({"task_id": ["calm"], "trial": 2, "outcome": "pass"}) + "\n")
        f.write(json.dumps({**json.loads((run / "results.jsonl").read_text().split("\n")[0]), "outcome": "won"}) + "\n")
    assert [(r.task_id, r.trial, r.outcome) for r in ResultLog(run).latest()] == [("calm", 1, "pass")]
    html_path, junit_path = write_reports(run)
    assert "PASS calm" in html_path.read_text()
    assert ET.parse(junit_path).getroot().find("testsuite").get("tests") == "1"
