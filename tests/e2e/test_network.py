"""A task's network on a real linux-test guest: a service of the task reached by name through the
episode's proxy, a request outside the allowed origins refused and reported as a violation, and a
task without `network:` that still has no way out."""

import json
from pathlib import Path

import pytest

from vmtools import cu_run

# The agent's part (the oracle, run as the desktop user): the page through the guest's proxy,
# then a request no origin allows.
FETCH = """python3 - <<'PY'
import os, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:3128"}))
page = opener.open("http://site.test/index.html", timeout=60).read()
open(os.path.expanduser("~/page.html"), "wb").write(page)
try:
    opener.open("http://forbidden.test/secret?from=agent", timeout=60)
except urllib.error.HTTPError as e:
    print("refused:", e.code)
PY
"""

# The verifier compares the agent's copy with the page as the proxy gives it now: scoring's own
# fetches go through the episode's proxy too, so a replay scores from the cassette alone.
VERIFY_THROUGH_THE_PROXY = """python3 - <<'PY' && verdict pass
import os, sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:3128"}))
page = opener.open("http://site.test/index.html", timeout=60).read()
sys.exit(0 if open(os.environ["USER_HOME"] + "/page.html", "rb").read() == page else 1)
PY
verdict fail "page.html does not hold the page the proxy gives"
"""

# Nothing listens on the guest's proxy address, and nothing outside answers.
NO_WAY_OUT = """python3 - <<'PY' && verdict pass
import socket, sys
for address in (("127.0.0.1", 3128), ("10.0.2.2", 22), ("1.1.1.1", 53)):
    try:
        socket.create_connection(address, timeout=5).close()
    except OSError:
        continue
    print("FAIL reached", address)
    sys.exit(1)
PY
verdict fail "the guest reached something"
"""


def served_task(folder: Path, head: str, page: str, oracle: str, verify: str) -> None:
    """A task whose service site.test serves PAGE from its folder site/; HEAD: task.yaml's fields
    before its network block."""
    (folder / "site").mkdir(parents=True)
    (folder / "site" / "index.html").write_text(page)
    (folder / "task.yaml").write_text(head + "network:\n  services:\n    - {name: site.test, serve: site}\n")
    (folder / "oracle.sh").write_text(oracle)
    (folder / "verify.sh").write_text(verify)


def suite(root: Path) -> Path:
    served_task(root / "fetch-page",
                "id: fetch-page\ninstruction: Save http://site.test/index.html as ~/page.html.\nprofile: linux\n"
                # At a frozen clock too: the proxy runs at the task's instant, and the agent's
                # refused request must still be judged in the agent's time.
                "timeout_s: 120\nwrite_set: {allow: ['~/page.html']}\nclock: 2026-01-15T10:00:00Z\n",
                "<h1>cu-run network</h1>\n", FETCH, VERIFY_THROUGH_THE_PROXY)
    plain = root / "no-network"
    plain.mkdir()
    (plain / "task.yaml").write_text("id: no-network\ninstruction: Nothing.\nprofile: linux\ntimeout_s: 60\n"
                                     "write_set: {enabled: false}\n")
    (plain / "oracle.sh").write_text("true\n")
    (plain / "verify.sh").write_text(NO_WAY_OUT)
    return root


def test_a_service_is_reached_by_name_and_a_refused_origin_is_a_violation_then_replayed(linux_image, tmp_path):
    """Recorded against the task's service, then replayed twice from the cassette alone (no service
    runs): the same outcome each time, and the same violation."""
    out, root = tmp_path / "run", suite(tmp_path / "suite")
    result = cu_run("run", "--suite", str(root), "--agent", "oracle", "--net", "record", "--out", str(out),
                    timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = {r["task_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert records["fetch-page"]["outcome"] == "pass", records["fetch-page"]
    assert records["no-network"]["outcome"] == "pass", records["no-network"]

    (violation,) = records["fetch-page"]["violations"]
    assert violation["rule"] == "network" and "http://forbidden.test/secret?from=agent" in violation["detail"]
    assert "outside the allowed origins" in violation["detail"]
    assert records["no-network"]["violations"] == []

    # The warm state's forwarder was woken (network-warm.sh); the task without a network found
    # the same sleeping forwarder listening on nothing (NO_WAY_OUT tries its port).
    assert json.loads((out / "fetch-page" / "1" / "network.json").read_text())["guest_forwarder"] == "woken"
    log = [json.loads(line) for line in (out / "fetch-page" / "1" / "network.jsonl").read_text().splitlines()]
    assert {"verdict": "allowed", "url": "http://site.test/index.html"}.items() <= next(
        e for e in log if e["verdict"] == "allowed").items()
    assert not (out / "no-network" / "1" / "network.jsonl").exists()

    # The recorded cassette becomes the task's; the replays answer from it alone.
    cassette = out / "fetch-page" / "1" / "cassette.jsonl"
    assert "GET http://site.test/index.html " in cassette.read_text()
    (root / "fetch-page" / "cassette.jsonl").write_bytes(cassette.read_bytes())
    task_yaml = root / "fetch-page" / "task.yaml"
    task_yaml.write_text(task_yaml.read_text() + "  replay: cassette.jsonl\n")
    for replay in ("replay-1", "replay-2"):
        result = cu_run("run", "--suite", str(root), "--tasks", "fetch-page", "--agent", "oracle", "--net", "replay",
                        "--out", str(tmp_path / replay), timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        (record,) = map(json.loads, (tmp_path / replay / "results.jsonl").read_text().splitlines())
        assert record["outcome"] == "pass" and [v["rule"] for v in record["violations"]] == ["network"], record
        episode = tmp_path / replay / "fetch-page" / "1"
        assert json.loads((episode / "network.json").read_text())["services"] == {}, "a replay starts no service"
        verdicts = [json.loads(line)["verdict"] for line in (episode / "network.jsonl").read_text().splitlines()]
        assert "replayed" in verdicts and "allowed" not in verdicts
        run = json.loads((tmp_path / replay / "run.json").read_text())
        assert run["network"]["mode"] == "replay" and list(run["network"]["cassettes"]) == ["fetch-page"]


@pytest.mark.full  # a cold boot of linux-test (~45 s)
def test_a_cold_started_guest_starts_its_forwarder_itself(linux_image, tmp_path):
    """A guest booted for the episode has no warm state's forwarder to wake: network-start.sh
    starts one, and the episode is the same."""
    out, root = tmp_path / "run", suite(tmp_path / "suite")
    result = cu_run("run", "--suite", str(root), "--tasks", "fetch-page", "--agent", "oracle", "--start", "cold",
                    "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (record,) = map(json.loads, (out / "results.jsonl").read_text().splitlines())
    assert record["outcome"] == "pass" and [v["rule"] for v in record["violations"]] == ["network"], record
    assert json.loads((out / "fetch-page" / "1" / "network.json").read_text())["guest_forwarder"] == "started"


# As the desktop user: Chromium with no flag of cu-run's; the proxy comes from the managed policy the
# episode wrote, and the episode's CA from the user's NSS store.
CHROMIUM = """profile=$(mktemp -d)
timeout 180 chromium --headless=new --user-data-dir="$profile" --dump-dom https://site.test/index.html \
    > "$HOME/dom.html" 2> "$HOME/chromium.log"
"""


@pytest.mark.full  # the desktop's Chromium under TCG; the default tier's networked episode is the one above
def test_chromium_on_the_desktop_loads_a_service_over_https_through_the_proxy(desktop_image, tmp_path):
    root = tmp_path / "suite"
    served_task(root / "https-page",
                "id: https-page\ninstruction: Open https://site.test/.\nprofile: linux\nimage: linux-desktop\n"
                "timeout_s: 300\nwrite_set: {enabled: false}\n",
                "<html><body><p id=m>served through the proxy</p></body></html>\n", CHROMIUM,
                'grep -q "served through the proxy" "$USER_HOME/dom.html" && verdict pass\n'
                'verdict fail "no page: $(tail -c 300 "$USER_HOME/chromium.log")"\n')
    out = tmp_path / "run"
    result = cu_run("run", "--suite", str(root), "--agent", "oracle", "--out", str(out), timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (record,) = map(json.loads, (out / "results.jsonl").read_text().splitlines())
    assert record["outcome"] == "pass", record
    log = [json.loads(line) for line in (out / "https-page" / "1" / "network.jsonl").read_text().splitlines()]
    assert any(e["verdict"] == "allowed" and e["url"] == "https://site.test/index.html" for e in log), log
