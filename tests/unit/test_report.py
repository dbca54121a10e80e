"""report.html and junit.xml from a planted run folder; the page rendered by headless Chromium."""

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from PIL import Image
from runfolders import write_results

from runner.records.report import write_reports
from runner.records.results import EpisodeRecord, ResultLog

INITIAL = (255, 0, 255)   # magenta: only the planted screenshots have these colours
FINAL = (0, 200, 0)
STEP = (255, 140, 0)


def png(path, color, size=(1280, 800)):
    Image.new("RGB", size, color).save(path)


def planted_run(tmp_path):
    run = tmp_path / "run"
    records = [
        EpisodeRecord("editor", 1, "pass", "", 30.0, 0, 1, "2026-11-30T10:00:00", "2026-11-30T10:00:30",
                      {"restore": 0.8, "agent": 20.0}, checkpoints={"opened": True, "saved": True}),
        EpisodeRecord("editor", 2, "fail", "changed outside the allowed paths: /home/cu/.bashrc (modified)", 31.0,
                      1, 1, "2026-11-30T10:00:00", "2026-11-30T10:00:31", {}, checkpoints={"opened": True, "saved": False},
                      violations=[{"rule": "no-rm", "step": 2, "detail": "typed 'rm -rf ~'"}],
                      changed=["/home/cu/.bashrc (modified)"]),
        EpisodeRecord("calc", 1, "verifier_error", "no verdict", 5.0, 0, 1, "2026-11-30T10:01:00",
                      "2026-11-30T10:01:05", {}),
    ]
    write_results(run, records)
    (run / "run.json").write_text(json.dumps({"suite": {"name": "planted", "tasks": ["editor", "calc"],
                                                        "content_sha256": "ab" * 32},
                                              "agent": {"name": "scripted"}, "accel": {"used": "tcg"}}))
    ep = run / "editor" / "1"
    ep.mkdir(parents=True)
    png(ep / "initial.png", INITIAL)
    png(ep / "final.png", FINAL)
    png(ep / "step-0001.png", STEP)
    (ep / "trajectory.jsonl").write_text(
        json.dumps({"step": 1, "tool": "computer_use_screenshot", "action": "screenshot", "arguments": {},
                    "result": "PNG", "screenshot": "step-0001.png", "duration_s": 0.04}) + "\n"
        + json.dumps({"step": 2, "tool": "computer_use_keyboard_type", "action": "type",
                      "arguments": {"text": "<script>alert(1)</script>"}, "result": "ok", "duration_s": 0.01}) + "\n")
    (ep / "verify.log").write_text("exit 0\n--- stdout\nPASS\n")
    (run / "editor" / "2").mkdir(parents=True)
    return run


def test_report_is_self_contained_and_escapes_what_the_agent_typed(tmp_path):
    html_path, _ = write_reports(planted_run(tmp_path))
    page = html_path.read_text()
    refs = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]*)""", page)
    assert refs and all(r.startswith(("data:", "#")) for r in refs), refs
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "&lt;script&gt;" in page  # the typed text, shown, not run
    for text in ("changed outside the allowed paths", "no-rm", "checkpoint progress", "flaky", "phases: restore 0.8 s"):
        assert text in page, text


def test_junit_has_a_testcase_per_task_and_trial(tmp_path):
    _, junit = write_reports(planted_run(tmp_path))
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"editor trial 1", "editor trial 2", "calc trial 1"}
    assert cases["editor trial 2"].find("failure") is not None
    assert cases["calc trial 1"].find("error").get("type") == "verifier_error"
    assert "violation no-rm" in cases["editor trial 2"].find("system-out").text


def test_chromium_shows_the_screenshots(tmp_path):
    """Episodes are collapsed but for each task's first failure, which is open: its screens show."""
    run = planted_run(tmp_path)
    ResultLog(run).append(EpisodeRecord("editor", 1, "fail", "the file was not saved", 30.0, 0, 1,
                                        "2026-11-30T10:00:00", "2026-11-30T10:00:30", {}))
    html_path, _ = write_reports(run)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is missing: scripts/setup-host.sh installs it"
    shot = tmp_path / "page.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,3000",
                    f"--screenshot={shot}", html_path.as_uri()], check=True, capture_output=True, timeout=120)
    image = Image.open(shot).convert("RGB")
    colours = {c for _n, c in image.getcolors(maxcolors=1 << 20)}

    def shown(rgb):  # JPEG thumbnails shift colours a little
        return any(all(abs(a - b) <= 12 for a, b in zip(c, rgb, strict=False)) for c in colours)

    assert shown(INITIAL) and shown(FINAL) and shown(STEP)


def test_cu_run_report_regenerates_both_files(tmp_path):

    run = planted_run(tmp_path)
    done = subprocess.run([sys.executable, "-m", "runner", "report", str(run)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert (run / "report.html").is_file() and (run / "junit.xml").is_file()
    missing = subprocess.run([sys.executable, "-m", "runner", "report", str(tmp_path / "nothing")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    other = subprocess.run([sys.executable, "-m", "runner", "report", str(tmp_path / "other")],
                           capture_output=True, text=True, timeout=60)
    said = " ".join(other.stderr.split())
    assert other.returncode == 1 and "is not a run folder" in said and "(it holds notes.txt)" in said


def test_task_defects_and_runs_without_results_are_reported(tmp_path):
    run = planted_run(tmp_path)
    page = write_reports(run)[0].read_text()
    assert "task defects" in page and "calc: trial 1: no verdict" in page
    # A run interrupted before any episode ended: an empty report, not "not a run folder".
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_text(json.dumps({"suite": {"name": "s", "tasks": ["a"]}}))
    assert "passes / scored" in write_reports(empty)[0].read_text()


def test_provenance_reads_as_tables_not_dict_dumps(tmp_path):
    run = planted_run(tmp_path)
    provenance = {"started_at": "2026-12-01T10:00:00", "start": {"used": "warm", "requested": "auto", "notice": None},
                  "image": {"name": "linux-test", "profile": "linux", "sha256": "ab" * 32},
                  "suite": {"name": "planted", "tasks": ["editor", "calc"], "content_sha256": "cd" * 32}}
    (run / "run.json").write_text(json.dumps({**json.loads((run / "run.json").read_text()), **provenance}))
    page = write_reports(run)[0].read_text()
    assert "notice: None" not in page and "name: linux-test, profile" not in page and ">notice<" not in page
    assert "<th>used</th><td>warm</td>" in page and "<th>profile</th><td>linux</td>" in page
    assert f"title='{'ab' * 32}'" in page  # a sha256, shortened, whole on hover


def test_clicks_and_drags_are_drawn_on_the_screen_the_agent_last_saw(tmp_path):
    import base64
    import io

    run = planted_run(tmp_path)
    ep = run / "editor" / "1"
    steps = [json.loads(line) for line in (ep / "trajectory.jsonl").read_text().splitlines()]
    steps.append({"step": 3, "tool": "computer_use_mouse_click", "action": "click",
                  "arguments": {"x": 640, "y": 400, "button": "left", "double": False}, "result": "ok",
                  "duration_s": 0.01})
    steps.append({"step": 4, "tool": "computer_use_mouse_drag", "action": "drag",
                  "arguments": {"x1": 100, "y1": 100, "x2": 1100, "y2": 700, "button": "left"}, "result": "ok",
                  "duration_s": 0.2})
    (ep / "trajectory.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    page = write_reports(run)[0].read_text()
    film = page[page.index("Trajectory (4 steps)"):]
    frames = re.findall(r"src='data:image/jpeg;base64,([^']+)'", film)
    assert len(frames) == 3  # the screenshot, and the click and the drag drawn on it

    def red_near(frame: str, x: float, y: float) -> bool:
        image = Image.open(io.BytesIO(base64.b64decode(frame))).convert("RGB")
        sx, sy = image.width / 1280, image.height / 800
        box = [image.getpixel((int(x * sx) + dx, int(y * sy) + dy)) for dx in range(-6, 7) for dy in range(-6, 7)
               if 0 <= int(x * sx) + dx < image.width and 0 <= int(y * sy) + dy < image.height]
        return any(r > 180 and g < 90 and b < 90 for r, g, b in box)

    assert not red_near(frames[0], 640, 400)
    assert red_near(frames[1], 640, 400) and red_near(frames[2], 1100, 700) and red_near(frames[2], 600, 400)


def test_a_recording_is_linked_beside_its_filmstrip(tmp_path):
    run = planted_run(tmp_path)
    (run / "editor" / "1" / "recording.mp4").write_bytes(b"\0" * 2048)
    page = write_reports(run)[0].read_text()
    assert "<a href='editor/1/recording.mp4'>screen recording</a>" in page


def test_a_validate_folder_is_one_thing_report_and_export_accept(tmp_path):
    """validate's folder: a verdict file and an index report over its oracle and nop runs, which
    `report` and `export inspect` take as they take a run folder."""
    from runner.records.folders import VALIDATION

    base = tmp_path / "validate"
    for agent, outcome in (("oracle", "pass"), ("nop", "fail")):
        write_results(base / agent, [EpisodeRecord("editor", 1, outcome, "", 3.0, 0, 1, "2026-11-30T10:00:00",
                                                   "2026-11-30T10:00:03", {})])
        (base / agent / "run.json").write_text(json.dumps({
            "suite": {"name": "planted", "tasks": ["editor"]}, "agent": {"name": agent}, "arguments": {"trials": 1},
            "started_at": "2026-11-30T10:00:00+00:00", "ended_at": "2026-11-30T10:00:05+00:00"}))
    (base / VALIDATION).write_text(json.dumps({"suite": "planted", "valid": True, "problems": [],
                                               "runs": {"oracle": "oracle", "nop": "nop"}}))
    done = subprocess.run([sys.executable, "-m", "runner", "report", str(base)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    index = (base / "report.html").read_text()
    assert "validate planted: <span class='pass'>valid</span>" in index
    assert "<a href='oracle/report.html'>oracle</a></td><td>every task passes</td><td>1 / 1 passed" in index
    assert "<a href='nop/report.html'>nop</a></td><td>every task fails</td><td>0 / 1 passed" in index
    assert (base / "oracle" / "report.html").is_file() and (base / "nop" / "junit.xml").is_file()
    pytest.importorskip("inspect_ai")
    exported = subprocess.run([sys.executable, "-m", "runner", "export", "inspect", str(base), "--out",
                               str(tmp_path / "logs")], capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "logs" / "oracle.eval").is_file() and (tmp_path / "logs" / "nop.eval").is_file()


def test_the_report_reads_at_a_glance(tmp_path):
    """The verdict first, a coloured task table with the failures' reasons and the instruction,
    episodes collapsed under their task with failures first, provenance last."""
    from runner.tasks.model import SUITES_DIR

    run = planted_run(tmp_path)
    provenance = json.loads((run / "run.json").read_text())
    provenance["suite"] = {**provenance["suite"], "path": str(SUITES_DIR / "linux-core")}
    (run / "run.json").write_text(json.dumps(provenance))
    page = write_reports(run)[0].read_text()
    verdict = "<p class='verdict mixed'>1 of 2 scored episodes passed"
    assert verdict in page and page.index(verdict) < page.index("<h2>Tasks</h2>") < page.index("<h2>Provenance</h2>")
    assert page.index("<h2>Episodes</h2>") < page.index("<h2>Provenance</h2>")  # provenance at the bottom
    assert "style='background:hsl(60,70%,90%)'>1/2" in page  # the editor's rate, coloured between red and green
    assert "changed outside the allowed paths: /home/cu/.bashrc (modified)</td>" in page  # why it failed
    # Failures first under their task, the first one open, the pass collapsed.
    group = page[page.index("id='task-editor'"):]
    assert group.index("id='editor-2' open") < group.index("id='editor-1'>")


def test_a_run_of_hundreds_of_episodes_stays_a_page_to_open(tmp_path):
    from runner.records.report import MAX_DETAILED_EPISODES

    run = tmp_path / "big"
    records = [EpisodeRecord(f"t{n % 50}", n // 50 + 1, "fail" if n % 3 else "pass", "nope", 1.0, 0, 1,
                             "2026-11-30T10:00:00", "2026-11-30T10:00:01", {}) for n in range(450)]
    write_results(run, records)
    (run / "run.json").write_text(json.dumps({"suite": {"name": "big", "tasks": [f"t{n}" for n in range(50)]},
                                              "agent": {"name": "x"}, "arguments": {"trials": 9}}))
    page = write_reports(run)[0].read_text()
    assert page.count("<details id=") == MAX_DETAILED_EPISODES  # whole episodes, bounded
    assert page.count("its files: <code>") == 450 - MAX_DETAILED_EPISODES  # the rest, a line each
    assert len(page) < 2_000_000


HOSTILE = "fa\ufffeil\uffff \U0001fffe\ufdd0 \x0b\x0c\x01 \ud800 end"  # XML-illegal, noncharacters, a lone surrogate


def test_guest_text_with_xml_illegal_code_points_leaves_both_reports_parseable(tmp_path):
    from runner.scoring.verdict import Verdict, clean_reason, parse_verdict  # noqa: F401 - the reason's own path
    run = tmp_path / "run"
    write_results(run, [EpisodeRecord("editor", 1, "fail", HOSTILE, 3.0, 0, 1, "2026-11-30T10:00:00",
                                      "2026-11-30T10:00:03", {}, checkpoints={HOSTILE: False},
                                      violations=[{"rule": "no-rm", "step": 1, "detail": HOSTILE}])])
    (run / "run.json").write_text(json.dumps({"suite": {"name": "planted", "tasks": ["editor"]},
                                              "agent": {"name": "nop"}}))
    html_path, junit = write_reports(run)
    suite = ET.parse(junit).getroot().find("testsuite")  # parses: no code point XML cannot carry
    (case,) = suite.iter("testcase")
    assert case.find("failure").get("message").endswith("end") and "\ufffe" not in junit.read_text()
    page = html_path.read_text(errors="strict")
    assert not any(c in page for c in "\ufffe\uffff\ufdd0\x0b\x01")
    # and the reason itself, as the verdict parser makes it, is one printable line without them
    assert not any(c in clean_reason(HOSTILE) for c in "\ufffe\uffff\ufdd0\U0001fffe\ud800")


def test_tasks_verified_from_live_state_are_marked(tmp_path):
    """A desktop_in_verify task's score rests on what kept programs answered: the run records it
    (run.json's suite.live_state), and the report says so in the summary and on its row."""
    run = planted_run(tmp_path)
    meta = json.loads((run / "run.json").read_text())
    meta["suite"]["live_state"] = ["editor"]
    (run / "run.json").write_text(json.dumps(meta))
    page = write_reports(run)[0].read_text()
    assert re.search(r"verified from live desktop state[^<]*</th><td>editor</td>", page)
    row = page[page.index("<a href='#task-editor'>"):].split("</tr>")[0]
    assert "live state</span>" in row
    calc = page[page.index("<a href='#task-calc'>"):].split("</tr>")[0]
    assert "live state</span>" not in calc
