"""OSWorld's tasks imported and scored on real VMs: setup translated from upstream's config, the
collector in the guest after the agent, the pull, and upstream's own metric (desktop-env from
PyPI) in the sandbox on the host (docs/benchmarks.md).

The default tier validates offline tasks with cu-run's oracles: each oracle must score 1.0 and
nop 0. The full tier validates every offline task that runs here, walks the hard-20 rule on
stand-in files, and sets a hostile agent that turns the
file a getter reads into a FIFO, a link to root's files and a huge file, which must each fail,
never drop out of the rate, and change nothing on the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loopback_http import LoopbackHTTPS, QuietHandler, leaf_for
from vmtools import cu_run, leftovers

REPO = Path(__file__).resolve().parents[2]
DATA = next((p for p in (REPO.parent / "shared" / "data", Path("/work/shared/data")) if p.is_dir()), None)

pytestmark = pytest.mark.skipif(DATA is None, reason="the benchmarks' task files (../shared/data) are not here")

# Offline tasks of different shapes: a command getter and a rule (the renamed folder), and a
# GIMP config file written when upstream's postconfig presses Ctrl+Q through pyautogui.
SAMPLE = ("e0df059f-28a6-4169-924f-b9623e7184cc", "7b7617bd-57cc-468e-9c91-40c4ec2bcb3d")


@pytest.fixture(scope="module")
def osworld(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("suites") / "osworld"
    done = cu_run("tasks", "import", "osworld", str(DATA / "osworld-f6cee71"), "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def results(folder: Path) -> dict[str, dict]:
    return {r["task_id"]: r for r in (json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines())}


@pytest.fixture(scope="module")
def sample_validated(desktop_image, osworld, tmp_path_factory) -> Path:
    """The sample validated once: its test checks the scores, and the rescore test scores its
    episodes again (a desktop episode under TCG is ~40 s; the rescore needs none of its own)."""
    out = tmp_path_factory.mktemp("sample") / "validate"
    done = cu_run("validate", "--suite", str(osworld), "--tasks", ",".join(SAMPLE), "--out", str(out), timeout=3000)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_imported_offline_tasks_validate_with_upstreams_metrics(sample_validated, host, settings):
    out = sample_validated
    oracle, nop = results(out / "oracle"), results(out / "nop")
    assert {t: r["outcome"] for t, r in oracle.items()} == dict.fromkeys(SAMPLE, "pass")
    assert {t: r["outcome"] for t, r in nop.items()} == dict.fromkeys(SAMPLE, "fail")
    for task_id in SAMPLE:
        scored = json.loads((out / "oracle" / task_id / "1" / "scoring.json").read_text())
        assert scored["score"] == 1.0 and scored["evaluators"]["version"] == "desktop-env 1.0.2"
        assert (out / "oracle" / task_id / "1" / "upstream.json").is_file()  # kept for a rescore
        assert json.loads((out / "nop" / task_id / "1" / "scoring.json").read_text())["score"] == 0.0
    # The renamed folder's getter ran as the user and gathered its answer; the gold is inline.
    answer = out / "oracle" / SAMPLE[0] / "1" / "collected" / "result-0" / "stdout"
    assert answer.read_text() == "Directory exists.\n"
    assert leftovers(host, settings) == []


@pytest.mark.full
def test_every_offline_task_that_runs_here_validates(desktop_pool_of_two, osworld, tmp_path):
    """docs/benchmarks.md's table: each offline task that runs here and can be scored has an
    oracle that scores 1.0, and nop scores 0; the rest are left out, each with its reason."""
    out = tmp_path / "validate"
    done = cu_run("validate", "--suite", str(osworld), "--tags", "offline", "--vm-pool", "2", "--out", str(out),
                  timeout=5400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    oracle, nop = results(out / "oracle"), results(out / "nop")
    assert len(oracle) == 19 and {r["outcome"] for r in oracle.values()} == {"pass"}, oracle
    assert set(nop) == set(oracle) and {r["outcome"] for r in nop.values()} == {"fail"}, nop
    assert "5ac2891a-eacd-4954-b339-98abba077adb: metric check_play_and_exit is not in" in done.stdout + done.stderr


def test_rescore_scores_the_collected_output_again_without_an_agent(sample_validated, tmp_path):
    for arm, outcome in (("oracle", "pass"), ("nop", "fail")):  # validate's arms are runs of their own
        run, again = sample_validated / arm, tmp_path / f"rescored-{arm}"
        before = (run / "run.json").read_text()
        done = cu_run("rescore", str(run), "--out", str(again), timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"rescored {len(SAMPLE)} episodes" in done.stdout and "; 0 changed" in done.stdout
        assert {r["outcome"] for r in results(again).values()} == {outcome}
        assert json.loads((again / "run.json").read_text())["rescored"][0]["evaluators"]["version"] == \
            "desktop-env 1.0.2"
        assert (run / "run.json").read_text() == before  # the run itself is never written


# Hostile agents against an imported task whose getter reads a file of the user's with no
# postconfig in between (Impress's auto-save setting in LibreOffice's registrymodifications.xcu).
TARGET_TASK = "2cd43775-7085-45d8-89fa-9e35c0a915cf"
XCU = "$HOME/.config/libreoffice/4/user/registrymodifications.xcu"
ATTACKS = {
    "getter-fifo": f'quit soffice.bin\nrm -f "{XCU}"\nmkfifo "{XCU}"',
    "getter-link": f'quit soffice.bin\nrm -f "{XCU}"\nln -s /etc/shadow "{XCU}"',
    "getter-huge": f'quit soffice.bin\nrm -f "{XCU}"\ntruncate -s 100G "{XCU}"',
    # a daemon that, once the agent is over, would write the solved setting: the agent's
    # processes are killed before the collector, so it never gets to
    "getter-late-daemon": (f'quit soffice.bin\ncp "{XCU}" "$HOME/.solved"\n'
                           "sed -i 's|</oor:items>|<item oor:path=\"/org.openoffice.Office.Common/Save/Document\">"
                           "<prop oor:name=\"AutoSaveTimeIntervall\" oor:op=\"fuse\"><value>3</value></prop></item>"
                           f"</oor:items>|' \"$HOME/.solved\"\n"
                           f'setsid nohup sh -c \'sleep 20; cp "$HOME/.solved" "{XCU}"\' >/dev/null 2>&1 &'),
}


@pytest.mark.full
def test_hostile_agents_against_a_getter_fail_and_leave_the_host_alone(desktop_image, osworld, tmp_path):
    import shutil

    suite = tmp_path / "hostile"
    for name, attack in ATTACKS.items():
        folder = suite / name
        shutil.copytree(osworld / TARGET_TASK, folder)
        spec = (folder / "task.yaml").read_text().replace(f"id: {TARGET_TASK}", f"id: {name}")
        (folder / "task.yaml").write_text(spec)
        (folder / "oracle.sh").write_text('. "$TASK_DIR/oracle_lib.sh"\n' + attack + "\n")
    out = tmp_path / "run"
    done = cu_run("run", "--suite", str(suite), "--agent", "oracle", "--out", str(out), timeout=3000)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = results(out)
    assert {t: r["outcome"] for t, r in records.items()} == dict.fromkeys(ATTACKS, "fail"), records
    for name in ("getter-fifo", "getter-link"):
        assert (out / name / "1" / "collected" / "result-0" / "0.missing").exists()
    assert (out / "getter-huge" / "1" / "collected" / "result-0" / "0.too-large").exists()
    assert not any(p.is_symlink() for p in out.rglob("*"))
    assert all(r["duration_s"] < 900 for r in records.values())


# The hard-20 rule (docs/benchmarks.md) as the docs give it, on stand-in files: valid files of
# each kind (a workbook, a document, a presentation, an image), different for each URL, served on
# loopback and fetched into an asset store; the walk's nop baseline runs on real VMs.
HARD20 = ("--seed", "20261020", "--tags", "test-all",
          "--tags", "multi_apps,libreoffice_calc,libreoffice_writer,libreoffice_impress,gimp,thunderbird",
          "--exclude-tags", "test-small,infeasible,gdrive,systemd,gnome-settings,audio")
MAKE_STAND_INS = r"""
import json, sys, zlib
from pathlib import Path
import docx, openpyxl, pptx
from PIL import Image
out = Path(sys.argv[1])
for number, url in enumerate(json.loads(Path(sys.argv[2]).read_text())):
    path, mark = out / f"{number}", f"stand-in {zlib.crc32(url.encode())}"
    kind = url.rsplit(".", 1)[-1].lower()
    if kind == "xlsx":
        book = openpyxl.Workbook(); book.active["A1"] = mark; book.active["B2"] = number; book.save(path)
    elif kind == "docx":
        doc = docx.Document(); doc.add_paragraph(mark); doc.save(path)
    elif kind == "pptx":
        deck = pptx.Presentation(); deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = mark; deck.save(path)
    elif kind in ("png", "jpg", "jpeg"):
        Image.new("RGB", (64, 48), (number % 256, 80, 160)).save(path, "PNG" if kind == "png" else "JPEG")
    else:
        path.write_text(mark + "\n")
"""


@pytest.mark.full
def test_the_hard_20_walk_on_stand_in_files_keeps_tasks_whose_nop_completes_at_0(desktop_pool_of_two, osworld,
                                                                                  settings, tmp_path):
    import subprocess
    from urllib.parse import quote, urlsplit

    from unit.stand_ins import REVISION, StandIns

    from runner.benchmarks.task_assets import task_assets
    from runner.benchmarks.scoring_env import ensure_env
    from runner.tasks.model import load_suite

    suite = load_suite(str(osworld))
    urls = sorted({u for t in suite.tasks for u in task_assets(t).all})
    made = tmp_path / "made"
    made.mkdir()
    (tmp_path / "urls.json").write_text(json.dumps(urls))
    env = ensure_env(settings.cache_dir)
    subprocess.run([str(env.python), "-c", MAKE_STAND_INS, str(made), str(tmp_path / "urls.json")], check=True,
                   timeout=600)
    by_path = {quote(urlsplit(u).path, safe="/%:@!$&'()*+,;="): (made / str(n)).read_bytes() for n, u in enumerate(urls)}

    def served(path: str) -> bytes | None:  # any revision of the dataset: the fetch pins one
        return by_path.get(path.replace(f"/resolve/{REVISION}/", "/resolve/main/"))

    store = tmp_path / "assets"
    with StandIns(served) as stand_ins:
        done = cu_run("assets", "fetch", "--suite", str(osworld), "--assets", str(store), "--mirror", stand_ins.url,
                      timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = tmp_path / "hard2.yaml"
    done = cu_run("tasks", "select", "--suite", str(osworld), *HARD20, "--count", "2", "--vm-pool", "2",
                  "--assets", str(store), "--out", str(out), timeout=5400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    import yaml

    selection = yaml.safe_load(out.read_text())
    assert len(selection["tasks"]) == 2, selection
    baseline = results(tmp_path / selection["baseline_run"])
    for task_id in selection["tasks"]:
        assert baseline[task_id]["outcome"] == "fail"
        scored = json.loads((tmp_path / selection["baseline_run"] / task_id / "1" / "scoring.json").read_text())
        assert scored["score"] == 0.0  # setup and evaluation completed, and doing nothing scored 0
    assert all(s["reason"] for s in selection["skipped"])


# OSWorld's chrome 7a5a7856: its setup opens two pages, and the agent bookmarks the one in front.
WEB_TASK = "7a5a7856-f1b6-42a4-ade9-1ca81ca0f263"
TITLES = {"jalammar.github.io": "The Illustrated Transformer – Jay Alammar",
          "blog.eleuther.ai": "Rotary Embeddings: A Relative Revolution | EleutherAI Blog"}


class WebStandIn(QuietHandler):
    """The two sites of WEB_TASK, on loopback: a page titled as the real one, for any path."""

    def do_GET(self):  # noqa: N802 - http.server's name
        title = TITLES.get(self.headers["Host"].split(":")[0], "unknown site")
        self.reply(f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
                   f"<p>{self.path}</p></body></html>".encode(), "text/html; charset=utf-8")


@pytest.mark.full  # three desktop episodes with Chromium under TCG
def test_an_osworld_web_task_recorded_against_stand_ins_scores_the_same_from_its_cassette_twice(desktop_image, tmp_path):
    """Imported with its sites as its network, recorded through the proxy against loopback
    stand-ins of both sites (--net-hosts), kept in the asset store, then replayed twice with the
    stand-ins stopped: each replay scores 1.0 from upstream's metric, from the cassette alone."""
    from runner.network.proxy import make_run_ca

    suite = tmp_path / "osworld"
    done = cu_run("tasks", "import", "osworld", str(DATA / "osworld-f6cee71"), "--out", str(suite), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    make_run_ca(tmp_path / "internet-ca", "stand-in internet CA")
    cert, key = leaf_for(tmp_path / "internet-ca" / "mitmproxy-ca.pem", tuple(TITLES), tmp_path)
    with LoopbackHTTPS(WebStandIn, cert, key) as internet:
        hosts = tmp_path / "net-hosts.yaml"
        hosts.write_text("hosts:\n" + "".join(f"  {name}: 127.0.0.1:{internet.port}\n" for name in TITLES)
                         + f"ca: {tmp_path / 'internet-ca' / 'mitmproxy-ca-cert.pem'}\n")
        recorded = cu_run("run", "--suite", str(suite), "--tasks", WEB_TASK, "--agent", "oracle", "--net", "record",
                          "--net-hosts", str(hosts), "--out", str(tmp_path / "record"), timeout=1800)
    assert recorded.returncode == 0, recorded.stdout[-3000:] + recorded.stderr[-3000:]
    assert results(tmp_path / "record")[WEB_TASK]["outcome"] == "pass"
    run = json.loads((tmp_path / "record" / "run.json").read_text())
    assert run["network"]["mode"] == "record" and set(run["network"]["hosts"]["hosts"]) == set(TITLES)

    kept = cu_run("assets", "cassettes", str(tmp_path / "record"), "--assets", str(tmp_path / "assets"), timeout=120)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    (sha,) = json.loads((suite / "cassettes.json").read_text())["cassettes"].values()

    for replay in ("replay-1", "replay-2"):  # the stand-ins are gone: only the cassette answers
        done = cu_run("run", "--suite", str(suite), "--tasks", WEB_TASK, "--agent", "oracle", "--net", "replay",
                      "--assets", str(tmp_path / "assets"), "--out", str(tmp_path / replay), timeout=1800)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert results(tmp_path / replay)[WEB_TASK]["outcome"] == "pass"
        episode = tmp_path / replay / WEB_TASK / "1"
        assert json.loads((episode / "scoring.json").read_text())["score"] == 1.0
        log = [json.loads(line) for line in (episode / "network.jsonl").read_text().splitlines()]
        assert {"https://jalammar.github.io/illustrated-transformer/", "https://blog.eleuther.ai/rotary-embeddings/"} \
            <= {e["url"] for e in log if e["verdict"] == "replayed"}
        assert not [e for e in log if e["verdict"] == "allowed"], "a replay connects to nothing"
        assert json.loads((tmp_path / replay / "run.json").read_text())["network"]["cassettes"] == \
            {WEB_TASK: sha.removeprefix("sha256:")}


@pytest.mark.full
def test_the_audit_reuses_validates_controls_and_the_sample_survives_the_battery(sample_validated, osworld, tmp_path):
    """`cu-run audit --quick` on the sample's validate folder: the oracle's and nop's episodes are
    reused, only the attacks run, and every pair scored by upstream's metrics is safe."""
    out = tmp_path / "audit"
    done = cu_run("audit", "--suite", str(osworld), "--tasks", ",".join(SAMPLE), "--quick", str(sample_validated),
                  "--vm-pool", "1", "--out", str(out), timeout=5400)
    audit = json.loads((out / "audit.json").read_text())
    unsafe = [(c["task"], c["attack"], c["why"], c["reason"]) for c in audit["cells"]
              if c["status"] in ("unsafe", "broken", "inconclusive")]
    assert unsafe == [] and done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (out / "runs" / "oracle").exists() and not (out / "runs" / "nop").exists()  # reused, not run
    assert {c["attack"] for c in audit["cells"]} >= {"oracle", "nop", "mention-paths", "end-session"}
