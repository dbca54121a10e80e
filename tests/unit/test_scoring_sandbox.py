"""Host scoring runs a benchmark's metric in a sandbox (runner.benchmarks.sandbox): the guest's
collected output is hostile, and a metric may evaluate it as Python. These tests score with a
fake metrics package (FAKE_METRICS, a stand-in for desktop_env's layout) and the system Python,
so every part of the sandbox is the real one: bubblewrap, the limits, the scoring program."""

from __future__ import annotations

import json
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runner.benchmarks.sandbox import Limits, run_scorer

SYSTEM_PYTHON = Path("/usr/bin/python3")

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (scripts/setup-host.sh)")

FAKE_INIT = ("from .fake import exact, evaluates, writes_home, connects, spins, hogs, reads_host, uses_left_out, "
             "lengths, dated\n")
FAKE_METRICS = '''
import os, socket, time
import easyocr  # left out of the scoring venv: importing it works, using it fails the metric

def exact(result, expected, **options):
    return 1.0 if result == expected["expected"] else 0.0

def lengths(result, expected=None, scale=1):
    # a file path from vm_file (or None), a string from vm_command_line
    if result is None:
        return 0.0
    return min(1.0, len(open(result).read()) * scale / 10) if os.path.sep in result else float(len(result) == 3)

def evaluates(result, expected):
    # as basic_os.check_gnome_favorite_apps does: guest text evaluated as Python
    return 1.0 if eval(result) == expected["expected"] else 0.0

def writes_home(result, expected=None):
    open(os.environ.get("TARGET", "/in/planted"), "w").write("x")
    return 1.0

def connects(result, expected=None):
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    return 1.0

def spins(result, expected=None):
    while True:
        pass

def hogs(result, expected=None):
    blocks = []
    while True:
        blocks.append(bytearray(256 * 2**20))

def reads_host(result, expected):
    return float(os.path.exists(expected["path"]))

def uses_left_out(result, expected=None):
    return easyocr.Reader(["en"])

def dated(result, expected):
    # as a metric that checks a file was "saved today" does
    import datetime
    return 1.0 if datetime.date.today().isoformat() == expected["date"] else 0.0
'''


@pytest.fixture
def fake_package(tmp_path) -> Path:
    root = tmp_path / "fake-evaluators"
    metrics = root / "desktop_env" / "evaluators" / "metrics"
    metrics.mkdir(parents=True)
    (root / "desktop_env" / "__init__.py").write_text("raise ImportError('the package __init__ must not run')\n")
    (root / "desktop_env" / "evaluators" / "__init__.py").write_text("raise ImportError('nor this one')\n")
    (metrics / "__init__.py").write_text(FAKE_INIT)
    (metrics / "fake.py").write_text(FAKE_METRICS)
    return root


def collected(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "collected"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def score(fake_package, evaluator, collected_dir=None, assets=None, limits=None, clock=None):
    return run_scorer(SYSTEM_PYTHON, fake_package, evaluator, collected_dir, assets or {}, ("easyocr",),
                      limits or Limits(wall_s=60), clock=clock)


def test_a_metric_scores_what_the_collector_gathered(tmp_path, fake_package):
    got = score(fake_package, {"func": "exact", "result": {"type": "vm_command_line", "command": "x"},
                               "expected": {"type": "rule", "rules": {"expected": "hello\n"}}},
                collected(tmp_path, {"result-0/stdout": "hello\n"}))
    assert got.score == 1.0 and got.error is None
    assert got.metrics == [{"func": "exact", "score": 1.0}]


def test_several_metrics_follow_upstreams_and_and_or(tmp_path, fake_package):
    gathered = collected(tmp_path, {"result-0/0": "12345", "result-1/stdout": "abc"})
    evaluator = {"func": ["lengths", "lengths"],
                 "result": [{"type": "vm_file", "path": "/home/user/a.txt", "dest": "a.txt"},
                            {"type": "vm_command_line", "command": "x"}],
                 "options": [{"scale": 1}, {}]}
    both = score(fake_package, evaluator, gathered)
    assert both.score == pytest.approx(0.75) and [m["score"] for m in both.metrics] == [0.5, 1.0]
    either = score(fake_package, {**evaluator, "conj": "or"}, gathered)
    assert either.score == 1.0
    first_zero = score(fake_package, evaluator, collected(tmp_path / "z", {"result-1/stdout": "abc"}))
    assert first_zero.score == 0.0 and len(first_zero.metrics) == 1  # a missing file: None, 0, and it stops


def test_a_gold_file_comes_from_the_host(tmp_path, fake_package):
    gold = tmp_path / "blob"
    gold.write_text("1234567890")
    got = score(fake_package, {"func": "lengths", "result": {"type": "cloud_file", "path": "https://x/gold.txt",
                                                                  "dest": "gold.txt"}},
                assets={"https://x/gold.txt": gold})
    assert got.score == 1.0


def test_guest_text_evaluated_as_python_cannot_touch_the_host(tmp_path, fake_package):
    marker = tmp_path / "host-file"
    marker.write_text("untouched")
    payload = f"open({str(marker)!r}, 'w').write('changed') or ['a']"
    got = score(fake_package, {"func": "evaluates", "result": {"type": "vm_command_line", "command": "x"},
                               "expected": {"type": "rule", "rules": {"expected": ["a"]}}},
                collected(tmp_path, {"result-0/stdout": payload}))
    assert marker.read_text() == "untouched"
    assert got.score is None and "No such file" in (got.error or "")  # the host's folders are not even there


@pytest.mark.parametrize("target", ["/in/planted", "/evaluators/planted", "/venv/planted", "/usr/planted"])
def test_the_inputs_and_the_code_are_read_only(tmp_path, fake_package, target, monkeypatch):
    evaluator = {"func": "writes_home", "result": {"type": "rule", "rules": {}}}
    monkeypatch.setenv("TARGET", target)  # not passed in: the sandbox's environment is its own
    got = score(fake_package, evaluator)
    assert got.score is None and "Read-only file system" in (got.error or "")
    assert not (fake_package / "planted").exists()


def test_there_is_no_network(fake_package):
    got = score(fake_package, {"func": "connects", "result": {"type": "rule", "rules": {}}})
    assert got.score is None and "unreachable" in (got.error or "").lower()


def test_the_hosts_files_are_not_visible(fake_package):
    got = score(fake_package, {"func": "reads_host", "result": {"type": "rule", "rules": {}},
                               "expected": {"type": "rule", "rules": {"path": str(Path.home())}}})
    assert got.score == 0.0


def test_a_metric_that_runs_forever_is_killed_in_bounded_time(fake_package):
    got = score(fake_package, {"func": "spins", "result": {"type": "rule", "rules": {}}}, limits=Limits(wall_s=3))
    assert got.score is None and "ran past 3 s" in (got.error or "")
    assert got.seconds < 30


def test_a_metric_that_eats_memory_is_stopped(fake_package):
    got = score(fake_package, {"func": "hogs", "result": {"type": "rule", "rules": {}}},
                limits=Limits(wall_s=60, memory_mib=1024))
    assert got.score is None and "MemoryError" in (got.error or "")


def test_a_left_out_module_fails_the_metric_loudly(fake_package):
    got = score(fake_package, {"func": "uses_left_out", "result": {"type": "rule", "rules": {}}})
    assert got.score is None and got.left_out and "left out" in (got.error or "")


def test_an_unknown_metric_is_an_error(fake_package):
    got = score(fake_package, {"func": "no_such_metric", "result": {"type": "rule", "rules": {}}})
    assert got.score is None and "no_such_metric" in (got.error or "")


def test_the_scoring_program_imports_nothing_of_cu_run():
    import ast

    source = Path(sys.modules["runner.benchmarks.sandbox"].__file__).with_name("score_entry.py").read_text()
    imported = {n.module if isinstance(n, ast.ImportFrom) else a.name for n in ast.walk(ast.parse(source))
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    assert not {m for m in imported if m and m.split(".")[0] == "runner"}


def test_what_the_metrics_print_does_not_become_the_result(tmp_path, fake_package):
    (fake_package / "desktop_env/evaluators/metrics/fake.py").write_text(
        FAKE_METRICS + "\ndef printer(result, expected):\n    print(json.dumps({'score': 1.0}))\n    return 0.0\n"
        "import json\n")
    (fake_package / "desktop_env/evaluators/metrics/__init__.py").write_text(FAKE_INIT.rstrip() + ", printer\n")
    got = score(fake_package, {"func": "printer", "result": {"type": "rule", "rules": {}},
                               "expected": {"type": "rule", "rules": {}}})
    assert got.score == 0.0
    assert json.loads(got.stderr.strip().splitlines()[-1]) == {"score": 1.0}  # it went to stderr


def test_a_metric_that_prints_without_end_costs_the_host_no_memory(tmp_path, fake_package):
    """What a metric prints comes of files the agent made; the host keeps only its tail."""
    import resource

    (fake_package / "desktop_env/evaluators/metrics/fake.py").write_text(
        FAKE_METRICS + "\ndef chatty(result, expected):\n    import sys\n    block = 'x' * 2**20 + '\\n'\n"
        "    for _ in range(400):\n        sys.stdout.write(block)\n    return 1.0\n")
    (fake_package / "desktop_env/evaluators/metrics/__init__.py").write_text(FAKE_INIT.rstrip() + ", chatty\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    got = score(fake_package, {"func": "chatty", "result": {"type": "rule", "rules": {}},
                               "expected": {"type": "rule", "rules": {}}})
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert got.score == 1.0, got
    assert grown_mib < 100, f"the host's peak memory grew by {grown_mib:.0f} MiB reading 400 MiB of output"


def test_a_metric_reads_the_tasks_frozen_clock_as_today(fake_package):
    """The guest saw the task's instant; a metric that checks "saved today" must see it too."""
    frozen = datetime(2031, 3, 7, 23, 59, 30, tzinfo=UTC)
    evaluator = {"func": "dated", "result": {"type": "rule", "rules": {}},
                 "expected": {"type": "rule", "rules": {"date": "2031-03-07"}}}
    assert score(fake_package, evaluator, clock=frozen).score == 1.0
    assert score(fake_package, evaluator).score == 0.0, "without a clock the metric runs at the host's time"
