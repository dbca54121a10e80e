"""network.jsonl, bounded: what the guest writes into it is cut, its lines are capped, and what
the cap drops is still counted, its refusals with their time (runner/network/proxy_log.py)."""

import ast
import json
from pathlib import Path

import pytest

from runner.network.proxy_log import DROPPED, MAX_FIELD, SUMMARY_WIDTH, BoundedLog, bounded, read_entries


@pytest.mark.parametrize("text", [
    "x" * 100_000,  # one character each in JSON
    "\U0001f600" * 10_000,  # twelve each (a surrogate pair, escaped)
    "\x00" * 10_000,  # six each
    "ok " * 300 + "\u00e9" * 5000,
])
def test_a_long_string_is_cut_to_the_limit_as_json_writes_it(text):
    cut = bounded(text)
    assert len(json.dumps(cut)) - 2 <= MAX_FIELD and cut.endswith(f"...[cut from {len(text)} characters]")
    kept = cut[:cut.rindex("...[cut from")]
    budget = MAX_FIELD - (len(cut) - len(kept))  # what the mark leaves
    assert text.startswith(kept) and len(json.dumps(text[:len(kept) + 1])) - 2 > budget, "the longest start that fits"


def test_a_string_that_fits_is_kept_whole():
    assert bounded("https://example.com/a?b=c") == "https://example.com/a?b=c"
    assert bounded("\u00e9" * (MAX_FIELD // 6)) == "\u00e9" * (MAX_FIELD // 6)


def test_past_the_cap_lines_are_counted_in_one_last_line_rewritten_in_place(tmp_path):
    log = BoundedLog(tmp_path / "network.jsonl", max_lines=3)
    for verdict in ("allowed", "refused", "allowed"):
        log.write({"verdict": verdict, "url": "http://site.test/"})
    assert len(read_entries(log.path)) == 3
    log.write({"verdict": "refused", "url": "http://evil.test/" + "x" * 10_000})
    size = log.path.stat().st_size
    for verdict in ("allowed", "refused", "background") * 100:
        log.write({"verdict": verdict, "url": "http://evil.test/"})
    assert log.path.stat().st_size == size, "the last line is rewritten, not added to"
    *kept, last = read_entries(log.path)
    assert [e["verdict"] for e in kept] == ["allowed", "refused", "allowed"]
    assert last["verdict"] == DROPPED and last["lines"] == 3
    assert last["dropped"] == {"refused": 101, "allowed": 100, "background": 100}
    first, final = last["refused_mono"]
    assert kept[1]["mono"] <= first <= final <= last["mono"]
    assert len(log.path.read_text().split("\n")[3]) == SUMMARY_WIDTH - 1


def test_each_line_carries_both_clocks_and_strings_are_cut(tmp_path):
    log = BoundedLog(tmp_path / "network.jsonl")
    log.write({"verdict": "refused", "url": "u" * 10_000, "reason": "r" * 10_000, "status": 403})
    (entry,) = read_entries(log.path)
    assert {"t", "mono"} <= entry.keys() and entry["status"] == 403
    assert len(entry["url"]) <= MAX_FIELD and len(entry["reason"]) <= MAX_FIELD


def test_a_line_still_being_written_is_not_read(tmp_path):
    path = tmp_path / "network.jsonl"
    path.write_text('{"verdict": "allowed"}\n{"verdict": "ref')
    assert read_entries(path) == [{"verdict": "allowed"}]


def test_the_log_imports_the_standard_library_only():
    """The proxy loads it in mitmproxy's own interpreter, where cu-run is not installed."""
    tree = ast.parse((Path(__file__).parents[2] / "runner" / "network" / "proxy_log.py").read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "json", "threading", "time", "pathlib", "typing"}


def test_a_torn_or_foreign_line_is_skipped_not_the_end_of_the_episodes_scoring(tmp_path):
    path = tmp_path / "network.jsonl"
    path.write_bytes(b'{"verdict": "refused", "url": "http://a/"}\n{"verdict": "ref\n[1]\n\xff\xfe\n'
                     b'{"verdict": "forwarded"}\n{"partial')
    assert [e["verdict"] for e in read_entries(path)] == ["refused", "forwarded"]
