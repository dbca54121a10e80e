"""Scale on one host: throughput (episodes a minute) of the linux-core oracle suite and the host
memory of an idle VM (QEMU's PSS), warm, at pool 1, 2, 4 and 8, side by side in one run.

    python bench/scale.py [--pools 1,2,4,8] [--trials 1]

Needs warm states for the largest pool (cu-run image warm linux-test --slots 8). Prints one
JSON object: per pool, the wall time, episodes a minute, passes and infra errors, and the
PSS of each of that many idle restored VMs (median, in MiB), against the 0.6 GB target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, pss_mib, warm_oracle_run

from runner.config import Settings
from runner.runs.scope import ScopeRequest, open_scope

TARGET_MIB_PER_VM = 0.6 * 1000**3 / 2**20


def idle_pss(settings: Settings, pool: int) -> list[float]:
    """POOL VMs restored and idle, the desktop on screen: each one's QEMU PSS."""
    vms = []
    with open_scope(settings, ScopeRequest("linux-test", accel="tcg", start="warm", vm_pool=pool)) as scope:
        try:
            make_vm = scope.vm_factory("scale")
            for slot in range(scope.vm_pool):
                vm = make_vm(slot, warm=scope.start.slots[slot])
                vm.start()
                vms.append(vm)
            return [round(pss_mib(int(Path(f"/run/libvirt/qemu/{vm.name}.pid").read_text())), 1) for vm in vms]
        finally:
            for vm in vms:
                vm.teardown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pools", default="1,2,4,8")
    parser.add_argument("--trials", type=int, default=1)
    args = parser.parse_args()
    settings = Settings.resolve()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pool in (int(p) for p in args.pools.split(",")):
            result, counts = warm_oracle_run(settings, pool, Path(tmp) / f"pool-{pool}", args.trials)
            pss = idle_pss(settings, pool)
            results[f"pool_{pool}"] = {**counts, "idle_vm_pss_mib": pss,
                                       "idle_vm_pss_median_mib": round(statistics.median(pss), 1),
                                       "pool_used": max((r.slot for r in result.records), default=-1) + 1}
    base = results.get("pool_1", {}).get("episodes_per_min")
    for r in results.values():
        r["throughput_vs_pool_1"] = round(r["episodes_per_min"] / base, 2) if base else None
    emit("scale", {"suite": "linux-core", "agent": "oracle", "start": "warm",
                   "target_idle_vm_pss_mib": round(TARGET_MIB_PER_VM), "pools": results})


if __name__ == "__main__":
    main()
