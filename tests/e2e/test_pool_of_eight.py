"""Pools of 8 on one host (issue 16): eight warm slots, then validate linux-core at pool 8.

Slow on a 2-core TCG host (warming six more slots takes ~8 min the first time, the run ~3 min),
so it is in the full tier: `pytest --full tests/e2e/test_pool_of_eight.py` runs it."""

import json
from datetime import datetime

import pytest
from vmtools import cu_run, leftovers

from runner.vm.warming import warm_image

pytestmark = pytest.mark.full
POOL = 8


def test_validate_linux_core_at_a_pool_of_eight(linux_image, host, settings, accel, tmp_path):
    warm_image(host, settings, linux_image, POOL, accel, progress=lambda _line: None)
    out = tmp_path / "validate"
    result = cu_run("validate", "--suite", "linux-core", "--vm-pool", str(POOL), "--out", str(out), timeout=1800)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "capped at" not in result.stdout + result.stderr  # admission let all eight in

    records = {arm: [json.loads(line) for line in (out / arm / "results.jsonl").read_text().splitlines()]
               for arm in ("oracle", "nop")}
    assert len(records["oracle"]) == POOL and {r["outcome"] for r in records["oracle"]} == {"pass"}
    assert len(records["nop"]) == POOL and {r["outcome"] for r in records["nop"]} == {"fail"}
    assert all(r["attempts"] == 1 and "restore" in r["phases"] for arm in records.values() for r in arm)
    # All eight slots were used, and at some moment all eight episodes ran at once.
    oracle = records["oracle"]
    assert {r["slot"] for r in oracle} == set(range(POOL))
    latest_start = max(datetime.fromisoformat(r["started_at"]) for r in oracle)
    assert all(datetime.fromisoformat(r["ended_at"]) > latest_start for r in oracle)
    assert leftovers(host, settings) == []
