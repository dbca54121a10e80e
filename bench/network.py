"""Network benchmark: what the recording proxy costs an episode, on this host, with no VM.

    python bench/network.py [--starts 5] [--requests 200]

Measured side by side in one run (the host is noisy), against a loopback site standing in for
the internet under a name the runner maps:
- the proxy's start (a fresh CA and mitmdump ready), as an episode pays it;
- one HTTP request: straight to the site, through the proxy live, through the proxy recording,
  and answered from the cassette (replay), interleaved request by request.
Prints one JSON object: medians and p95s, and each mode's ratio to the direct request.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from common import emit, summarize
from loopback_http import LoopbackHTTP, QuietHandler

from runner.config import Settings
from runner.choices import NetMode
from runner.network.proxy import EpisodeProxy, ProxyConfig, make_run_ca, proxy_env

PAGE = b"<html>" + b"x" * 20_000 + b"</html>"  # a small web page


class Site(QuietHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        self.reply(PAGE, "text/html")


def opener(port: int | None):
    proxies = {"http": f"http://127.0.0.1:{port}"} if port else {}
    return urllib.request.build_opener(urllib.request.ProxyHandler(proxies))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    settings = Settings.resolve()
    mitmdump = proxy_env(settings.cache_dir)
    with tempfile.TemporaryDirectory(prefix="cu-run-bench-net-") as work, LoopbackHTTP(Site) as site:
        root = Path(work)
        mapped = {"site.test": ("127.0.0.1", site.server.server_address[1])}
        allow = ("http://site.test",)
        starts = []
        for n in range(args.starts):
            t = time.perf_counter()
            make_run_ca(root / f"ca-{n}")
            with EpisodeProxy(mitmdump, root / f"ca-{n}", root / f"start-{n}", ProxyConfig(allow=allow, mapped=mapped)):
                starts.append(time.perf_counter() - t)
        cassette = root / "cassette.jsonl"
        with EpisodeProxy(mitmdump, root / "ca-0", root / "record", ProxyConfig(allow=allow, mapped=mapped, mode=NetMode.record,
                                                                               cassette=cassette)) as recording:
            opener(recording.port).open("http://site.test/page", timeout=30).read()
        with ExitStack() as stack:
            live = stack.enter_context(EpisodeProxy(mitmdump, root / "ca-0", root / "live",
                                                    ProxyConfig(allow=allow, mapped=mapped)))
            record = stack.enter_context(EpisodeProxy(mitmdump, root / "ca-0", root / "record-2", ProxyConfig(
                allow=allow, mapped=mapped, mode=NetMode.record, cassette=root / "cassette-2.jsonl")))
            replay = stack.enter_context(EpisodeProxy(mitmdump, root / "ca-0", root / "replay",
                                                      ProxyConfig(allow=allow, mode=NetMode.replay, cassette=cassette)))
            modes = {"direct": (opener(None), site.url + "/page"), "live": (opener(live.port), "http://site.test/page"),
                     "record": (opener(record.port), "http://site.test/page"),
                     "replay": (opener(replay.port), "http://site.test/page")}
            samples: dict[str, list[float]] = {name: [] for name in modes}
            for _ in range(args.requests):
                for name, (client, url) in modes.items():  # interleaved: each mode sees the same noise
                    t = time.perf_counter()
                    body = client.open(url, timeout=30).read()
                    samples[name].append(time.perf_counter() - t)
                    assert body == PAGE, name
    direct = summarize(samples["direct"])["median_s"]
    emit("network", {
        "proxy_start": summarize(starts),
        "request": {name: {**summarize(values), "ratio_to_direct": round(summarize(values)["median_s"] / direct, 2)}
                    for name, values in samples.items()},
        "page_bytes": len(PAGE),
    })


if __name__ == "__main__":
    main()
