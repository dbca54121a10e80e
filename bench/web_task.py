"""Web task benchmark: one networked task on linux-test, recorded and replayed, side by side.

    python bench/web_task.py [--rounds 3] [--pages 30]

The task's oracle reads PAGES pages of a site through the guest's proxy, timing it in the guest.
A loopback server plays the site, reached through --net-hosts while recording. Each round runs
one record episode (the site answers) and one replay episode (the site stopped; the cassette
answers), warm, so both modes see the same noise. Prints one JSON object: per mode, the median
of the guest's page-reading time, of the episode's network start (proxy, carriers, guest end)
and of the whole episode, and replay's ratio to record.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from common import emit
from loopback_http import LoopbackHTTP, QuietHandler

from runner.config import Settings
from runner.records.cassettes import keep_cassettes
from runner.assets import AssetStore
from runner.runs.request import RunRequest
from runner.runs.run import run_suite

PAGE = b"<html>" + b"x" * 50_000 + b"</html>"
SITE = "docs.bench.example"

ORACLE = """python3 - <<'PY'
import time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:3128"}))
t = time.monotonic()
for n in range(__PAGES__):
    assert len(opener.open(f"http://__SITE__/page/{n}", timeout=60).read()) == __SIZE__
open("/tmp/read_s", "w").write(str(time.monotonic() - t))
PY
"""
VERIFY = 'echo "read_s $(cat /tmp/read_s)"; [ -s /tmp/read_s ] && verdict pass\nverdict fail "no pages read"\n'


class Site(QuietHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.reply(PAGE, "text/html")


def write_suite(root: Path, pages: int) -> Path:
    task = root / "suite" / "read-pages"
    task.mkdir(parents=True)
    (task / "task.yaml").write_text("id: read-pages\ninstruction: Read the site's pages.\nprofile: linux\n"
                                    f"timeout_s: 600\nwrite_set: {{enabled: false}}\nnetwork:\n  allow: [http://{SITE}]\n")
    oracle = ORACLE.replace("__PAGES__", str(pages)).replace("__SITE__", SITE).replace("__SIZE__", str(len(PAGE)))
    (task / "oracle.sh").write_text(oracle)
    (task / "verify.sh").write_text(VERIFY)
    return root / "suite"


def episode(settings: Settings, suite: Path, out: Path, **options) -> dict:
    result = run_suite(settings, RunRequest.of(str(suite), "oracle", out=out, start="warm", **options),
                       Console(file=open("/dev/null", "w")))
    (record,) = result.records
    assert record.outcome == "pass", (record.outcome, record.reason)
    verify = (out / "read-pages" / "1" / "verify.log").read_text()
    read_s = float(next(line.split()[1] for line in verify.splitlines() if line.startswith("read_s ")))
    return {"read_s": read_s, "network_s": record.phases["network"], "episode_s": record.duration_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=30)
    args = parser.parse_args()
    settings = Settings.resolve()
    samples: dict[str, list[dict]] = {"record": [], "replay": []}
    with tempfile.TemporaryDirectory(prefix="cu-run-bench-web-") as work:
        root = Path(work)
        suite = write_suite(root, args.pages)
        for number in range(args.rounds):
            with LoopbackHTTP(Site) as site:
                hosts = root / "net-hosts.yaml"
                hosts.write_text(f"hosts:\n  {SITE}: 127.0.0.1:{site.port}\n")
                samples["record"].append(episode(settings, suite, root / f"record-{number}", net="record",
                                                 net_hosts=hosts))
            keep_cassettes(root / f"record-{number}", AssetStore(root / "assets"))  # the replay's, this round
            samples["replay"].append(episode(settings, suite, root / f"replay-{number}", net="replay",
                                             assets=root / "assets"))
        cassette = json.loads((suite / "cassettes.json").read_text())["cassettes"]["read-pages"]
    medians = {mode: {key: round(statistics.median(s[key] for s in runs), 3) for key in runs[0]}
               for mode, runs in samples.items()}
    emit("web_task", {
        "task": {"guest": "linux-test", "pages": args.pages, "page_bytes": len(PAGE), "rounds": args.rounds},
        "median": medians,
        "replay_to_record": {key: round(medians["replay"][key] / medians["record"][key], 2) for key in medians["record"]},
        "samples": samples, "last_cassette": cassette,
    })


if __name__ == "__main__":
    main()
