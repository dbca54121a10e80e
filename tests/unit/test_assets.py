"""The asset store (runner.assets): fetched once into blobs/sha256 with an index, a
Hugging Face resolve/main URL pinned to a revision, checked by sha256 on use, every missing one
named. Stand-in files are served on loopback: nothing here reaches the internet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.assets import AssetStore
from runner.benchmarks.task_assets import urls_of
from runner.benchmarks.host_scoring import prepare
from runner.errors import UsageError
from runner.tasks.model import load_suite
from stand_ins import REVISION, StandIns

HF = "https://huggingface.co/datasets/lab/cache/resolve/main"


def test_fetch_pins_a_resolve_main_url_and_keeps_content_by_hash(tmp_path):
    pinned = f"/datasets/lab/cache/resolve/{REVISION}"
    files = {f"{pinned}/calc/a.xlsx": b"input", f"{pinned}/gold.xlsx": b"gold", "/plain/other.bin": b"other"}
    store = AssetStore(tmp_path / "assets")
    urls = [f"{HF}/calc/a.xlsx", f"{HF}/gold.xlsx", "https://files.example.org/plain/other.bin"]
    with StandIns(files) as served:
        fetched, failures = store.fetch(urls, mirror=served.url)
        assert (fetched, failures) == (3, [])
        assert served.asked.count("/api/datasets/lab/cache/revision/main") == 1  # once per repository
        again, _ = store.fetch(urls, mirror=served.url)
        assert again == 0  # what the store has is not fetched again
    index = json.loads((tmp_path / "assets" / "index.json").read_text())["assets"]
    entry = next(e for e in index if e["url"].endswith("a.xlsx"))
    assert f"/resolve/{REVISION}/calc/a.xlsx" in entry["fetched_from"] and entry["size"] == 5
    found, problems = store.resolve(urls)
    assert problems == [] and found[f"{HF}/gold.xlsx"].read_bytes() == b"gold"
    assert found[f"{HF}/gold.xlsx"].parent == tmp_path / "assets" / "blobs" / "sha256"


def test_a_failed_download_is_named_and_the_rest_kept(tmp_path):
    store = AssetStore(tmp_path / "assets")
    with StandIns({"/ok.bin": b"fine"}) as served:
        fetched, failures = store.fetch(["https://h.example/ok.bin", "https://h.example/missing.bin"], mirror=served.url)
    assert fetched == 1 and len(failures) == 1 and "missing.bin" in failures[0]
    assert list(store.index()) == ["https://h.example/ok.bin"]
    assert not list((tmp_path / "assets" / "blobs").glob(".partial-*"))


def test_an_altered_or_missing_blob_is_named(tmp_path):
    store = AssetStore(tmp_path / "assets")
    with StandIns({"/a": b"aaa", "/b": b"bbb"}) as served:
        store.fetch(["https://h.example/a", "https://h.example/b"], mirror=served.url)
    found, _ = store.resolve(["https://h.example/a", "https://h.example/b"])
    found["https://h.example/a"].write_bytes(b"tampered")
    found["https://h.example/b"].unlink()
    _, problems = store.resolve(["https://h.example/a", "https://h.example/b", "https://h.example/c"])
    assert [p.split(": ", 1)[1] for p in problems] == [
        f"its blob {found['https://h.example/a']} does not match its sha256 (altered or truncated)",
        f"its blob {found['https://h.example/b']} is missing",
        f"not in the asset store {tmp_path / 'assets'}"]


def test_inputs_go_to_the_guest_and_gold_files_stay_on_the_host():
    data = {"config": [{"type": "download", "parameters": {"files": [{"url": "u-in", "path": "/home/user/a"}]}}],
            "evaluator": {"func": "compare_table",
                          "result": {"type": "vm_file", "path": "/home/user/a", "dest": "a"},
                          "expected": {"type": "cloud_file", "path": ["u-g1", "u-g2"], "dest": ["g1", "g2"], "multi": True}}}
    assets = urls_of(data)
    assert assets.guest == ("u-in",) and assets.host == ("u-g1", "u-g2")


def imported_task_suite(tmp_path: Path) -> Path:
    """A one-task imported suite whose setup downloads an input and whose metric reads a gold file."""
    suite = tmp_path / "suite"
    folder = suite / "t1"
    folder.mkdir(parents=True)
    upstream = {"id": "t1", "instruction": "x", "config": [
        {"type": "download", "parameters": {"files": [{"url": f"{HF}/in.xlsx", "path": "/home/user/in.xlsx"}]}}],
        "evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/in.xlsx", "dest": "in.xlsx"},
                      "expected": {"type": "cloud_file", "path": f"{HF}/gold.xlsx", "dest": "gold.xlsx"}}}
    raw = json.dumps(upstream).encode()
    import hashlib

    (folder / "upstream.json").write_bytes(raw)
    (folder / "collect.sh").write_text("true\n")
    (folder / "task.yaml").write_text(json.dumps({
        "id": "t1", "instruction": "x", "profile": "linux", "scoring": "host",
        "source": {"bench": "osworld", "version": "v", "path": "examples/x/t1.json",
                   "sha256": hashlib.sha256(raw).hexdigest(), "upstream_id": "t1"}}))
    return suite


def test_a_run_without_the_store_or_with_a_gap_is_refused_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("CU_RUN_ASSETS", raising=False)
    suite = load_suite(str(imported_task_suite(tmp_path)))
    with pytest.raises(UsageError, match="download 2 files .* no asset store was given") as refused:
        prepare(tmp_path / "cache", suite.tasks, None, None, str(suite.folder))
    assert "cu-run assets fetch --suite" in (refused.value.fix or "")
    store = AssetStore(tmp_path / "assets")
    with StandIns({f"/datasets/lab/cache/resolve/{REVISION}/in.xlsx": b"in"}) as served:
        store.fetch([f"{HF}/in.xlsx"], mirror=served.url)
    with pytest.raises(UsageError, match="lacks 1 of the 2 files") as gap:
        prepare(tmp_path / "cache", suite.tasks, tmp_path / "assets", None, str(suite.folder))
    assert "gold.xlsx: not in the asset store" in gap.value.message


def test_setup_gets_its_downloads_staged_and_never_the_gold_file(tmp_path):
    from runner.benchmarks.host_scoring import HostScoring, setup_inputs

    suite = load_suite(str(imported_task_suite(tmp_path)))
    store = AssetStore(tmp_path / "assets")
    with StandIns({f"/datasets/lab/cache/resolve/{REVISION}/in.xlsx": b"input",
                   f"/datasets/lab/cache/resolve/{REVISION}/gold.xlsx": b"gold"}) as served:
        store.fetch([f"{HF}/in.xlsx", f"{HF}/gold.xlsx"], mirror=served.url)
    found, _ = store.resolve([f"{HF}/in.xlsx", f"{HF}/gold.xlsx"])
    staged = setup_inputs(HostScoring(env=None, assets=found), suite.tasks[0])  # no scoring: no env
    sha = found[f"{HF}/in.xlsx"].name
    # what the guest's osw_download reads: the blob by its sha256, and the index naming its URL
    assert staged == {f"assets/{sha}": b"input", "assets/index": f"{sha} {HF}/in.xlsx\n".encode()}
