"""Start benchmark: cold boot vs warm restore, to shell-ready and to desktop-on-screen.

    python bench/start.py [--n 5]

Cold and warm episodes alternate on slot 0 in one run (the host is noisy), so the ratio
compares like with like. Warms slot 0 first if it has no current state. Prints one JSON
object: per mode the medians and p95s, the warm/cold ratios, the RAM state's size and
the host memory (QEMU's resident set) per VM once its desktop is up.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.images.catalog import Catalog
from runner.config import Settings
from runner.runs.scope import ScopeRequest, open_scope
from runner.vm.factory import VmFactory
from runner.images.linux_images import LINUX_TEST, build_image
from runner.vm.warming import warm_image


def qemu_rss_mib(domain: str) -> float:
    pid = Path(f"/run/libvirt/qemu/{domain}.pid").read_text().strip()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmRSS for QEMU of {domain}")


def one_start(make_vm: VmFactory, warm) -> dict:
    started = time.perf_counter()
    vm = make_vm(0, warm=warm)
    with vm:
        to_desktop = time.perf_counter() - started
        p = vm.timings.phases
        before_wait = p["overlay"] + p.get("restore", p.get("domain_start", 0.0))
        sample = {"to_shell_s": before_wait + p["shell_ready"], "to_desktop_s": to_desktop,
                  "rss_mib": qemu_rss_mib(vm.name)}
    return sample


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5, help="starts of each kind")
    args = parser.parse_args()

    settings = Settings.resolve()
    image, _ = build_image(Catalog(settings.images_dir), LINUX_TEST, progress=lambda _l: None)
    with open_scope(settings, ScopeRequest(image.name, start="cold")) as scope:
        accel, host = scope.accel, scope.host
        started = time.perf_counter()
        (slot,) = warm_image(host, settings, image, 1, accel, progress=lambda _l: None)
        warm_setup_s = round(time.perf_counter() - started, 1)
        samples: dict[str, list[dict]] = {"cold": [], "warm": []}
        make_vm = scope.vm_factory("bench")
        for _ in range(args.n):
            samples["cold"].append(one_start(make_vm, None))
            samples["warm"].append(one_start(make_vm, slot))

    results: dict = {"accel": accel, "n": args.n, "warm_slot_setup_s": warm_setup_s,
                     "warm_slot_made_in_s": slot.state.warm_seconds,
                     "ram_state_mib": round(slot.state.ram_bytes / 2**20, 1),
                     "frozen_slot_disk_mib": round(slot.state.base_bytes / 2**20, 1)}
    for mode, runs in samples.items():
        results[mode] = {
            "to_shell": summarize([r["to_shell_s"] for r in runs]),
            "to_desktop": summarize([r["to_desktop_s"] for r in runs]),
            "host_rss_mib_median": sorted(r["rss_mib"] for r in runs)[len(runs) // 2],
        }
    for what in ("to_shell", "to_desktop"):
        results[f"warm_over_cold_{what}"] = round(results["warm"][what]["median_s"] / results["cold"][what]["median_s"], 3)
    results["target_warm_desktop_at_most_15pct_of_cold"] = results["warm_over_cold_to_desktop"] <= 0.15
    emit("start", results)


if __name__ == "__main__":
    main()
