"""Host scoring with the benchmarks' real metrics (desktop-env 1.0.2, in the scoring venv that
scripts/setup-host.sh --test makes in the tests' cache) on collected output made here: OSWorld's
and WindowsAgentArena's tasks scored as their episodes' collectors would leave them. WAA cannot
run here; this is where its scoring is shown."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runner.benchmarks.host_scoring import HostScoring, metric_problems, score_collected_from
from runner.benchmarks.scoring_env import ensure_env
from runner.tasks.model import Task, load_task

DATA = next((p for p in (Path(__file__).resolve().parents[3] / "shared" / "data", Path("/work/shared/data"))
             if p.is_dir()), None)
WAA = DATA / "waa-6d39ed8/src/win-arena-container/client/evaluation_examples_windows/examples" if DATA else None
OSWORLD = DATA / "osworld-f6cee71/evaluation_examples/examples" if DATA else None

pytestmark = pytest.mark.skipif(DATA is None, reason="the benchmarks' task files (../shared/data) are not here")


@pytest.fixture(scope="module")
def env(settings):
    return ensure_env(settings.cache_dir)  # the tests' cache, where setup-host.sh --test made the venv


def upstream(root: Path, domain: str, stem: str) -> dict:
    return json.loads((root / domain / f"{stem}.json").read_text())


def collected(ep_dir: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = ep_dir / "collected" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return ep_dir


def venv_python(env, code: str) -> None:
    """Runs CODE with the scoring venv's Python (its openpyxl), to make a test's spreadsheets."""
    subprocess.run([str(env.python), "-c", code], check=True, capture_output=True, timeout=120)


def test_waa_vlc_setting_scores_from_the_collected_vlcrc(env, tmp_path):
    data = upstream(WAA, "vlc", "215dfd39-f493-4bc3-a027-8a97d72c61bf-WOS")
    scoring = HostScoring(env)
    good = score_collected_from(scoring, data, collected(tmp_path / "a", {"result-0/0": b"[qt]\nqt-bgcone=0\n"}))
    bad = score_collected_from(scoring, data, collected(tmp_path / "b", {"result-0/0": b"[qt]\nqt-bgcone=1\n"}))
    missing = score_collected_from(scoring, data, collected(tmp_path / "c", {"result-0/0.missing": b""}))
    assert (good[0].kind, bad[0].kind) == ("pass", "fail")
    assert json.loads((tmp_path / "a" / "scoring.json").read_text())["score"] == 1.0
    # upstream's metric opens the path it is given: None (no file) makes it raise, an error the
    # control episodes judge (docs/benchmarks.md)
    assert missing[0].kind == "error" and "TypeError" in missing[0].reason


def test_waa_spreadsheet_scores_against_its_gold_file_from_the_host(env, tmp_path):
    data = upstream(WAA, "libreoffice_calc", "01b269ae-2111-4a07-81fd-3fcd711993b0-WOS")
    gold_url = data["evaluator"]["expected"]["path"]
    make = ("import openpyxl, sys\n"
            "for path, total in (('{gold}', 6), ('{same}', 6), ('{other}', 7)):\n"
            "    book = openpyxl.Workbook(); sheet = book.active\n"
            "    for row in (('a', 1), ('b', 2), ('c', 3), ('total', total)): sheet.append(row)\n"
            "    book.save(path)\n")
    gold, same, other = tmp_path / "gold.xlsx", tmp_path / "same.xlsx", tmp_path / "other.xlsx"
    venv_python(env, make.format(gold=gold, same=same, other=other))
    scoring = HostScoring(env, {gold_url: gold})
    passed = score_collected_from(scoring, data, collected(tmp_path / "a", {"result-0/0": same.read_bytes()}))
    failed = score_collected_from(scoring, data, collected(tmp_path / "b", {"result-0/0": other.read_bytes()}))
    assert (passed[0].kind, failed[0].kind) == ("pass", "fail"), (passed, failed)


def test_waa_command_output_scores_with_a_rule(env, tmp_path):
    # is_extension_installed, "contain" rule: the PowerShell command prints the file's name if it exists
    data = upstream(WAA, "vs_code", "5e2d93d8-8ad0-4435-b150-1692aacaa994-WOS")
    scoring = HostScoring(env)
    found = b"project.code-workspace\r\n"
    verdict = score_collected_from(scoring, data, collected(tmp_path / "a", {"result-0/stdout": found}))
    nothing = score_collected_from(scoring, data, collected(tmp_path / "b", {"result-0/stdout": b"\n"}))
    assert verdict[0].kind == "pass", verdict
    assert nothing[0].kind == "fail", nothing


def test_osworld_metrics_the_env_lacks_are_named(env, tmp_path):
    def task(domain: str, stem: str) -> Task:
        folder = tmp_path / stem
        folder.mkdir()
        (folder / "upstream.json").write_bytes((OSWORLD / domain / f"{stem}.json").read_bytes())
        (folder / "collect.sh").write_text("true\n")
        (folder / "task.yaml").write_text(json.dumps({
            "id": stem, "instruction": "x", "profile": "linux", "scoring": "host",
            "source": {"bench": "osworld", "version": "v", "path": "p", "sha256": "0" * 64, "upstream_id": stem}}))
        return load_task(folder)

    problems = metric_problems(env, [task("vlc", "5ac2891a-eacd-4954-b339-98abba077adb"),
                                     task("libreoffice_impress", "2cd43775-7085-45d8-89fa-9e35c0a915cf")])
    assert problems == ["5ac2891a-eacd-4954-b339-98abba077adb: metric check_play_and_exit is not in desktop-env 1.0.2"]


def test_osworld_chrome_setting_scores_with_upstreams_getter_on_the_gathered_profile(env, tmp_path):
    # enable_do_not_track: upstream's own getter reads Preferences under the gathered home
    data = upstream(OSWORLD, "chrome", "030eeff7-b492-4218-b312-701ec99ee0cc")
    scoring = HostScoring(env)
    prefs = "result-0/home/.config/google-chrome/Default/Preferences"
    on = score_collected_from(scoring, data, collected(tmp_path / "a", {prefs: b'{"enable_do_not_track": true}'}))
    off = score_collected_from(scoring, data, collected(tmp_path / "b", {prefs: b'{"enable_do_not_track": false}'}))
    missing = score_collected_from(scoring, data, collected(tmp_path / "c", {prefs + ".missing": b""}))
    assert (on[0].kind, off[0].kind) == ("pass", "fail"), (on, off)
    assert missing[0].kind == "fail"  # upstream's getter answers "false" when it finds no file


def test_osworld_bookmarks_score_from_the_gathered_bookmarks_file(env, tmp_path):
    data = upstream(OSWORLD, "chrome", "2ad9387a-65d8-4e33-ad5b-7580065a27ca")
    bookmarks = "result-0/home/.config/google-chrome/Default/Bookmarks"
    folder = {"roots": {"bookmark_bar": {"children": [{"type": "folder", "name": "Favorites", "children": []}]}}}
    scoring = HostScoring(env)
    good = score_collected_from(scoring, data, collected(tmp_path / "a", {bookmarks: json.dumps(folder).encode()}))
    empty = score_collected_from(scoring, data, collected(tmp_path / "b", {bookmarks: b'{"roots": {}}'}))
    assert good[0].kind == "pass", good
    assert empty[0].kind != "pass", empty
