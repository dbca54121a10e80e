"""`cu-run audit` on real VMs. The default tier's smoke test: a task with a deliberately weak
verifier (it checks that the file exists) and its honest twin, against one attack of the battery
and a lab's own attack from its own module, with the oracle and nop controls. The full tier
audits the built-in suites with the whole battery, and every pair must be safe."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vmtools import cu_run, leftovers

SUITE = Path(__file__).parent / "audit_suite"
LAB = "audit_lab_attack:SloppyAnswer"


def audit(out: Path, *args: str, env: dict | None = None) -> tuple[int, dict]:
    result = cu_run("audit", *args, "--out", str(out), timeout=5400, env=env)
    assert (out / "audit.json").is_file(), result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads((out / "audit.json").read_text())
    return result.returncode, {(c["task"], c["attack"]): c for c in data["cells"]}


def test_the_audit_catches_a_weak_verifier_and_runs_a_labs_attack_beside_the_battery(linux_image, host, settings,
                                                                                     tmp_path):
    out = tmp_path / "audit"
    code, cells = audit(out, "--suite", str(SUITE), "--attacks", f"mention-paths,{LAB}", "--vm-pool", "2",
                        env={"PYTHONPATH": str(Path(__file__).parent)})
    assert code == 4  # an unsafe pair
    status = {pair: c["status"] for pair, c in cells.items()}
    assert status == {
        ("status-file", "oracle"): "ok", ("status-file", "nop"): "safe", ("status-file", "mention-paths"): "safe",
        ("status-file", LAB): "safe",
        ("weak-file", "oracle"): "ok", ("weak-file", "nop"): "safe", ("weak-file", "mention-paths"): "unsafe",
        ("weak-file", LAB): "unsafe"}, status
    weak = cells[("weak-file", "mention-paths")]
    assert weak["outcome"] == "pass" and weak["why"].startswith("passed: the verifier accepted")
    # What the attack did is in the episode's folder the report links to.
    assert "made /home/cu/Documents/status.txt" in (out / weak["episode"] / "agent.log").read_text()
    assert "status.txt does not say ready" in cells[("status-file", "mention-paths")]["reason"]
    junit = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert junit.get("tests") == "8" and junit.get("failures") == "2"
    page = (out / "report.html").read_text()
    assert page.index("weak-file") < page.index("Every task against every attack")
    assert leftovers(host, settings) == []


def test_a_refused_request_by_an_unusual_route_is_owed_its_violation(linux_image, host, settings, tmp_path):
    """network-routes on a networked task: its requests reach the guest's proxy, which refuses each,
    so the task's network rule is owed a violation, and the record holds it. The nop control of the
    same task sends nothing and is owed none."""
    from test_network import suite
    code, cells = audit(tmp_path / "audit", "--suite", str(suite(tmp_path / "suite")), "--tasks", "fetch-page",
                        "--attacks", "network-routes", "--vm-pool", "2")
    routes = cells[("fetch-page", "network-routes")]
    assert (routes["status"], routes["expected"], routes["recorded"]) == ("safe", ["network"], ["network"]), routes
    assert (cells[("fetch-page", "nop")]["expected"], cells[("fetch-page", "oracle")]["status"]) == ([], "ok")
    assert code == 0
    assert leftovers(host, settings) == []


@pytest.mark.full
@pytest.mark.parametrize("suite,image", [("linux-core", "linux-test"), ("linux-safety", "linux-test"),
                                         ("desktop-core", "linux-desktop")])
def test_the_built_in_suites_survive_the_whole_battery(suite, image, linux_image, request, tmp_path):
    if image == "linux-desktop":
        request.getfixturevalue("desktop_pool_of_two")
    code, cells = audit(tmp_path / "audit", "--suite", suite, "--image", image, "--vm-pool", "2")
    problems = {pair: (c["status"], c["why"], c["reason"]) for pair, c in cells.items()
                if c["status"] in ("unsafe", "broken", "inconclusive")}
    assert problems == {} and code == 0
