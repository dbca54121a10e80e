"""`cu-run tasks import`: OSWorld's and WindowsAgentArena's task files (../shared/data) become cu-run
suites, each task with its upstream JSON verbatim, its tags, its exclusions and its translated
steps (runner.benchmarks). The counts by category are those docs/benchmarks.md gives."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runner.benchmarks.importer import import_tree
from runner.benchmarks.linux_steps import collect_script, setup_script
from runner.cli import app
from runner.errors import UsageError
from runner.tasks.lint import errors, lint_suite
from runner.tasks.model import TagFilter, load_suite

REPO = Path(__file__).resolve().parents[2]
DATA = next((p for p in (REPO.parent / "shared" / "data", Path("/work/shared/data")) if p.is_dir()), None)
OSWORLD = DATA / "osworld-f6cee71" if DATA else None
WAA = DATA / "waa-6d39ed8" if DATA else None

pytestmark = pytest.mark.skipif(DATA is None, reason="the benchmarks' task files (../shared/data) are not here")

# docs/benchmarks.md, "What the importer finds"
OSWORLD_CATEGORIES = {"infeasible": 29, "gdrive": 8, "web": 76, "live-state": 10, "assets": 212, "offline": 34}
WAA_CATEGORIES = {"infeasible": 13, "gdrive": 0, "web": 18, "live-state": 7, "assets": 65, "offline": 51}


@pytest.fixture(scope="module")
def osworld(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("osworld")
    import_tree("osworld", OSWORLD, out)
    return out


@pytest.fixture(scope="module")
def waa(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("waa")
    import_tree("waa", WAA, out)
    return out


def test_osworld_imports_whole_with_the_documented_counts(osworld):
    record = json.loads((osworld / "import.json").read_text())
    assert record["tasks"] == 369 and record["version"] == "f6cee71"
    assert record["by_category"] == OSWORLD_CATEGORIES
    suite = load_suite(str(osworld))
    assert len(suite.tasks) == 369
    assert (osworld / "LICENSE").read_text().startswith(("Apache", "\n", " "))  # redistributed with its licence
    # 369 task folders and none besides
    assert sum(1 for p in osworld.iterdir() if p.is_dir()) == 369


def test_waa_imports_whole_and_every_powershell_script_parses(waa):
    record = json.loads((waa / "import.json").read_text())
    assert record["tasks"] == 154 and record["by_category"] == WAA_CATEGORIES
    checked, problems = lint_suite(str(waa))  # tree-sitter parses every .ps1
    assert checked == 154 and errors(problems) == []
    task = load_suite(str(waa)).tasks[0]
    assert task.spec.profile == "windows" and task.ext == ".ps1"


def test_every_osworld_script_passes_lint(osworld):
    checked, problems = lint_suite(str(osworld))
    assert checked == 369 and errors(problems) == []


def test_a_task_keeps_its_upstream_file_verbatim_and_its_source(osworld):
    task = next(t for t in load_suite(str(osworld)).tasks if t.id == "e0df059f-28a6-4169-924f-b9623e7184cc")
    source = task.spec.source
    original = OSWORLD / source.path
    assert (task.folder / "upstream.json").read_bytes() == original.read_bytes()
    assert source.sha256 == hashlib.sha256(original.read_bytes()).hexdigest()
    assert source.bench == "osworld" and source.version == "f6cee71" and source.upstream_id == task.id
    assert task.spec.scoring == "host" and task.spec.desktop_in_verify and task.spec.image == "linux-desktop"


def test_tasks_that_cannot_run_here_are_written_with_reasons_and_left_out_of_runs(osworld):
    suite = load_suite(str(osworld))
    excluded = {t.id: t.spec.excluded for t in suite.excluded_tasks()}
    infeasible = [t for t in suite.tasks if "infeasible" in t.spec.tags]
    assert len(infeasible) == 29 and all(t.id in excluded for t in infeasible)
    assert all(reason for reasons in excluded.values() for reason in reasons)
    chosen = suite.select(None)
    assert not {t.id for t in chosen} & set(excluded)
    assert len(chosen) == 369 - len(excluded)
    vs_code = next(t for t in suite.tasks if "vs_code" in t.spec.tags)
    with pytest.raises(UsageError, match="VS Code is not in linux-desktop"):
        suite.select([vs_code.id])


def test_web_tasks_get_their_sites_as_a_network_and_say_whether_a_cassette_can_replay_them(osworld, waa):
    suite = load_suite(str(osworld))
    by_id = {t.id: t for t in suite.tasks}
    # Its setup opens two pages, and it is scored on the Bookmarks file: a cassette can replay it.
    bookmarks = by_id["7a5a7856-f1b6-42a4-ade9-1ca81ca0f263"]
    assert bookmarks.spec.network is not None and not bookmarks.spec.excluded
    assert bookmarks.spec.network.allow == ("https://blog.eleuther.ai", "https://jalammar.github.io")
    assert {"web", "cassette"} <= set(bookmarks.spec.tags)
    # What a recording cannot stand in for, each with its reason.
    for task_id, why in (("26660ad1-6ebb-4f59-8cba-a8432dfe8d38", "measures the live network"),
                         ("94d95f96-9699-4208-98ba-3c3119edf9c2", "installs software"),
                         ("fc6d8143-9452-4171-9459-7f515143419a", "computed from the day it is scored")):
        task = by_id[task_id]
        assert "cassette" not in task.spec.tags
        assert any(r.startswith("needs the live internet") and why in r for r in task.spec.excluded), task.spec.excluded
    web = [t for t in suite.tasks if "web" in t.spec.tags]
    assert all(("cassette" in t.spec.tags) != any("live internet" in r or "names no site" in r for r in t.spec.excluded)
               for t in web)
    # A rule's URL pattern is no site, and no task is sent to loopback.
    origins = {o for t in web if t.spec.network for o in t.spec.network.allow}
    assert "https://www" not in origins and not any("localhost" in o or "127.0.0.1" in o for o in origins)
    # Windows guests have their network end: WAA's web tasks are classified as OSWorld's are, with
    # their sites as network: allow:, and what keeps one out is said for it (its getter, mostly).
    waa_web = {t.id: t for t in load_suite(str(waa)).tasks if "web" in t.spec.tags}
    assert not any("network end" in r for t in waa_web.values() for r in t.spec.excluded)
    edge_bookmark = waa_web["049d3788-c979-4ea6-934d-3a35c4630faf-wos"]
    assert edge_bookmark.spec.network is not None and edge_bookmark.spec.network.allow == ("https://jalammar.github.io",)
    assert "cassette" in edge_bookmark.spec.tags
    assert edge_bookmark.spec.excluded == ("getter favorites: the collector does not gather it yet",)
    installs = waa_web["eabc805a-bfcf-4460-b250-ac92135819f6-wos"]  # a VS Code extension from its store
    assert "cassette" not in installs.spec.tags and any("installs software" in r for r in installs.spec.excluded)
    assert all(t.spec.excluded for t in waa_web.values())  # none runs here yet: docs/network.md says why


def test_tags_choose_tasks_with_one_of_each_group_and_none_excluded(osworld):
    suite = load_suite(str(osworld))
    domains = ("libreoffice_calc", "gimp")
    chosen = suite.select(None, TagFilter(include=(domains, ("test-all",)), exclude=("assets",)))
    assert chosen and all(set(t.spec.tags) & set(domains) and "assets" not in t.spec.tags for t in chosen)
    with pytest.raises(UsageError, match="no task to run with a tag of nothing"):
        suite.select(None, TagFilter(include=(("nothing",),)))


def test_setup_translates_upstreams_steps():
    data = {"config": [
        {"type": "download",
         "parameters": {"files": [{"url": "https://huggingface.co/x/a.xlsx", "path": "/home/user/a.xlsx"}]}},
        {"type": "open", "parameters": {"path": "/home/user/a.xlsx"}},
        {"type": "sleep", "parameters": {"seconds": 5}},
        {"type": "activate_window", "parameters": {"window_name": "a.xlsx - LibreOffice Calc", "strict": True}},
        {"type": "execute",
         "parameters": {"command": ["python", "-c", "import pyautogui; pyautogui.click({SCREEN_WIDTH_HALF}, 1)"]}},
        {"type": "execute", "parameters": {"command": "echo {CLIENT_PASSWORD} | sudo -S mkdir ~/Desktop/d", "shell": True}},
        {"type": "sleep", "parameters": {"seconds": 2}},
        {"type": "googledrive", "parameters": {}}]}
    script = setup_script(data)
    text = "\n".join(script.lines)
    assert "osw_download https://huggingface.co/x/a.xlsx /home/user/a.xlsx" in text
    assert "osw_open /home/user/a.xlsx" in text
    assert "upstream sleeps 5 s here; the next step waits for its window" in text  # a condition, not a time
    assert "osw_activate_window 'a.xlsx - LibreOffice Calc' true false" in text
    assert "pyautogui.click(960, 1)" in text  # the screen's placeholders filled in
    assert "osw_root_shell 'mkdir ~/Desktop/d'" in text and "CLIENT_PASSWORD" not in text
    assert "osw_sleep 2" in text  # no window to wait for: the time stays
    assert script.downloads == {"https://huggingface.co/x/a.xlsx": "/home/user/a.xlsx"}
    assert script.problems == ["step googledrive: not translated to this guest"]


def test_the_collector_runs_postconfig_then_gathers_each_getter():
    data = {"evaluator": {
        "postconfig": [{"type": "execute",
                        "parameters": {"command": ["python", "-c", "import pyautogui; pyautogui.hotkey('ctrl', 's')"]}}],
        "func": ["compare_table", "exact_match"],
        "result": [{"type": "vm_file", "path": "/home/user/a.xlsx", "dest": "a.xlsx"},
                   {"type": "vm_command_line", "command": "ls ~", "shell": True}],
        "expected": [{"type": "cloud_file", "path": "https://huggingface.co/x/gold.xlsx", "dest": "gold.xlsx"},
                     {"type": "rule", "rules": {"expected": "a"}}]}}
    script = collect_script(data)
    text = "\n".join(script.lines)
    assert text.index("hotkey") < text.index("osw_export_begin") < text.index("osw_export_end")
    assert "osw_collect_file result-0 0 /home/user/a.xlsx" in text
    assert "osw_collect_command result-1 sh -c 'ls ~'" in text
    assert "gold" not in text  # the gold file never enters the guest
    assert script.problems == []


def test_chromes_profile_getters_gather_their_file_and_pkill_chrome_ends_chromium():
    data = {"evaluator": {
        "postconfig": [{"type": "launch", "parameters": {"command": ["pkill", "chrome"]}},
                       {"type": "launch", "parameters": {"command": ["google-chrome", "--remote-debugging-port=1337"]}}],
        "func": ["is_expected_bookmarks", "exact_match"],
        "result": [{"type": "bookmarks"}, {"type": "profile_name"}],
        "expected": [{"type": "rule", "rules": {}}, {"type": "rule", "rules": {}}]}}
    script = collect_script(data)
    assert script.lines[2:4] == ["osw_quit_chrome", "osw_launch google-chrome --remote-debugging-port=1337"]
    assert "osw_collect_home result-0 .config/google-chrome/Default/Bookmarks" in script.lines
    assert "osw_collect_home result-1 .config/google-chrome/Default/Preferences" in script.lines
    assert script.problems == []
    # a getter that reaches the live browser is still not gathered
    live = collect_script({"evaluator": {"func": "f", "result": {"type": "open_tabs_info"}}})
    assert live.problems == ["getter open_tabs_info: the collector does not gather it yet"]


def test_importing_again_replaces_the_import_and_a_foreign_folder_is_refused(tmp_path):
    out = tmp_path / "suite"
    import_tree("waa", WAA, out)
    (out / "stale-task-of-an-older-import").mkdir()
    with pytest.raises(UsageError, match="holds an import of waa, not osworld"):
        import_tree("osworld", OSWORLD, out)
    other = tmp_path / "mine"
    (other / "my-task").mkdir(parents=True)
    with pytest.raises(UsageError, match="holds no earlier import"):
        import_tree("waa", WAA, other)
    report = import_tree("waa", WAA, out)
    assert report.written == 154


def test_waa_ids_are_its_file_names_lower_case_and_a_mismatched_id_is_noted(waa):
    suite = load_suite(str(waa))
    ids = [t.id for t in suite.tasks]
    assert len(set(ids)) == 154 and all(i == i.lower() for i in ids)
    noted = {t.id for t in suite.tasks if any("the file's id field says" in f for f in t.spec.fidelity)}
    mismatched = {t.id for t in suite.tasks
                  if json.loads((t.folder / "upstream.json").read_bytes())["id"] != Path(t.spec.source.path).stem}
    assert "982d12a5-beab-424f-8d38-d2a48429e511-2-wos" in noted and noted == mismatched


def test_the_cli_imports_and_lists_counts_by_tag(tmp_path):
    from runner.cli.tasks import network_column

    runner = CliRunner()
    out = tmp_path / "osw"
    done = runner.invoke(app, ["tasks", "import", "osworld", str(OSWORLD), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert "369 osworld tasks (f6cee71)" in done.output and "offline 34" in done.output
    listed = runner.invoke(app, ["tasks", "list", "--suite", str(out), "--counts", "--tags", "gimp"])
    assert listed.exit_code == 0, listed.output
    assert "26 tasks with a tag of gimp" in listed.output.replace("\n", " ")
    web = runner.invoke(app, ["tasks", "list", "--suite", str(out), "--tags", "web", "--counts"], terminal_width=200)
    assert "17 of 83 tasks run here" in web.output, web.output
    # Each networked task's column says whether a replay has its cassette yet.
    by_id = {t.id: t for t in load_suite(str(out)).tasks}
    assert network_column(by_id["7a5a7856-f1b6-42a4-ade9-1ca81ca0f263"]).startswith("no cassette yet: --net record")
    assert network_column(by_id["e0df059f-28a6-4169-924f-b9623e7184cc"]) == "none"
    (out / "cassettes.json").write_text('{"cassettes": {"7a5a7856-f1b6-42a4-ade9-1ca81ca0f263": "sha256:' + "ab" * 32 + '"}}')
    assert network_column(load_suite(str(out)).select(["7a5a7856-f1b6-42a4-ade9-1ca81ca0f263"])[0]) == \
        "replays sha256:abababababab..."
    bad = runner.invoke(app, ["tasks", "import", "osworld", str(tmp_path / "nowhere"), "--out", str(out)])
    assert isinstance(bad.exception, UsageError) and "no such folder" in bad.exception.message


def test_the_task_yaml_is_plain_data(osworld):
    spec = yaml.safe_load((osworld / "e0df059f-28a6-4169-924f-b9623e7184cc" / "task.yaml").read_text())
    assert spec["tags"] == sorted(spec["tags"]) and "needs-sudo" in spec["tags"]
    assert any("sudo" in note for note in spec["fidelity"])


HARD20_DOMAINS = ("multi_apps", "libreoffice_calc", "libreoffice_writer", "libreoffice_impress", "gimp", "thunderbird")
HARD20_EXCLUDED = ("test-small", "infeasible", "gdrive", "systemd", "gnome-settings", "audio")


def test_the_hard_20_walk_without_assets_names_each_skipped_task_and_why(osworld):
    from runner.benchmarks.task_assets import missing_assets
    from runner.tasks.selection import Exclusions, draw, walk_order

    suite = load_suite(str(osworld))
    exclusions = Exclusions(tags=HARD20_EXCLUDED, include=(("test-all",), HARD20_DOMAINS))
    asked: list[str] = []

    def fake_nop_baseline(ids: list[str]) -> dict[str, tuple[str, str]]:
        # a stand-in for nop episodes: each completes and scores 0
        asked.extend(ids)
        return {i: ("fail", "score 0") for i in ids}

    selection = draw(suite, 20261020, 20, exclusions, fake_nop_baseline, baseline_name="nop",
                     precheck=missing_assets(None))
    pool = [t for t in suite.tasks if exclusions.admits(t)]
    assert all(set(t.spec.tags) & set(HARD20_DOMAINS) and not set(t.spec.tags) & set(HARD20_EXCLUDED) for t in pool)
    order = walk_order([t.id for t in pool], 20261020)
    walked = selection.tasks + [s["id"] for s in selection.skipped]
    assert sorted(walked) == sorted(order)  # with no assets the walk runs out: it reaches every task
    assert selection.tasks == [i for i in order if i in asked]  # kept in walk order, each one the baseline tried
    no_store = [s for s in selection.skipped if "no asset store was given" in s["reason"]]
    assert no_store and all(s["reason"].startswith("cannot be tried here: ") for s in selection.skipped)
    assert len(selection.tasks) < 20


def test_the_hard_20_walk_with_a_stand_in_asset_store_completes(osworld, tmp_path):
    """Every file the pool needs, fetched from stand-ins on loopback into a store: the walk tries
    each task that runs here, and stops at 20 kept."""
    from runner.assets import AssetStore
    from runner.benchmarks.task_assets import missing_assets, task_assets
    from runner.tasks.selection import Exclusions, draw, first_reason, offline_baseline, walk_order
    from stand_ins import StandIns

    suite = load_suite(str(osworld))
    exclusions = Exclusions(tags=HARD20_EXCLUDED, include=(("test-all",), HARD20_DOMAINS))
    pool = [t for t in suite.tasks if exclusions.admits(t)]
    urls = sorted({u for t in pool for u in task_assets(t).all})
    store = AssetStore(tmp_path / "assets")
    with StandIns(lambda path: f"stand-in for {path}".encode()) as served:
        fetched, failures = store.fetch(urls, mirror=served.url)
    assert failures == [] and fetched == len(urls) > 100
    # Upstream names some files in Chinese: they travel percent-encoded, and are kept under the URL as written.
    assert any(re.search("%[89A-F][0-9A-F]", path) for path in served.asked) and any(not u.isascii() for u in store.index())
    asked: list[str] = []

    def fake_nop_baseline(ids: list[str]) -> dict[str, tuple[str, str]]:
        asked.extend(ids)  # a stand-in for nop episodes: each completes and scores 0
        return {i: ("fail", "score 0") for i in ids}

    selection = draw(suite, 20261020, 20, exclusions, fake_nop_baseline, baseline_name="nop",
                     precheck=first_reason(offline_baseline, missing_assets(tmp_path / "assets")))
    assert len(selection.tasks) == 20
    order = walk_order([t.id for t in pool], 20261020)
    reached = order[:order.index(selection.tasks[-1]) + 1]
    assert sorted(selection.tasks + [s["id"] for s in selection.skipped]) == sorted(reached)  # no task passed over
    assert not [s for s in selection.skipped if "asset" in s["reason"]]  # the store has every file
    by_id = {t.id: t for t in suite.tasks}
    # only tasks that cannot run here, or that reach the web, which the offline baseline cannot try
    assert all(by_id[s["id"]].spec.excluded or by_id[s["id"]].spec.network for s in selection.skipped)
    assert any("walk's baseline runs offline" in s["reason"] for s in selection.skipped)
    assert selection.tasks == [i for i in order if i in asked]
