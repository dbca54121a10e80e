"""Episode benchmark: image build, overlay, cold start, teardown, and screenshot paths side by side.

    python bench/episode.py [--starts 3] [--captures 50] [--skip-full-build]

Prints one JSON object. Every ratio is measured in this one run (the host is noisy).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize, timed

from runner.images.catalog import Catalog
from runner.config import Settings
from runner.runs.scope import ScopeRequest, open_scope
from runner.vm.episode import EpisodeVM
from runner.hypervisor.overlay import create_overlay
from runner.images.linux_images import LINUX_TEST, build_image


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=3, help="cold starts to time")
    parser.add_argument("--captures", type=int, default=50, help="screenshots per capture path")
    parser.add_argument("--skip-full-build", action="store_true", help="do not time an uncached image build")
    args = parser.parse_args()

    settings = Settings.resolve()
    catalog = Catalog(settings.images_dir)
    results: dict = {}

    started = time.perf_counter()
    image, _ = build_image(catalog, LINUX_TEST, progress=lambda _l: None)
    results["image_build_cached_s"] = round(time.perf_counter() - started, 3)
    if not args.skip_full_build:
        with tempfile.TemporaryDirectory(dir=settings.cache_dir) as tmp:
            started = time.perf_counter()
            build_image(Catalog(Path(tmp)), LINUX_TEST, progress=lambda _l: None)
            results["image_build_uncached_s"] = round(time.perf_counter() - started, 1)
    results["image_disk_mib"] = round(image.manifest.disk_bytes / 2**20)

    with tempfile.TemporaryDirectory() as tmp:
        n = iter(range(10**6))
        results["overlay_create"] = summarize(timed(lambda: create_overlay(image.disk, Path(tmp) / f"o{next(n)}.qcow2"), 20))

    shell_ready, desktop_ready, domain_start, teardown = [], [], [], []
    with open_scope(settings, ScopeRequest(image.name, start="cold")) as scope:
        results["accel"] = scope.accel
        make_vm = scope.vm_factory(f"bench{os.getpid()}")
        for i in range(args.starts):
            vm = make_vm(i)
            vm.start()
            phases = vm.timings.phases
            domain_start.append(phases["overlay"] + phases["domain_start"])
            shell_ready.append(phases["overlay"] + phases["domain_start"] + phases["shell_ready"])
            desktop_ready.append(phases["overlay"] + phases["domain_start"] + phases["desktop_ready"])
            if i == args.starts - 1:
                results["screenshot"] = capture_paths(vm, args.captures)
            started = time.perf_counter()
            vm.teardown()
            teardown.append(time.perf_counter() - started)
    results["cold_start_to_domain_running"] = summarize(domain_start)
    results["cold_start_to_shell_ready"] = summarize(shell_ready)
    results["cold_start_to_desktop_on_screen"] = summarize(desktop_ready)
    results["teardown"] = summarize(teardown)
    emit("episode", results)


def capture_paths(vm: EpisodeVM, n: int) -> dict:
    """The three ways to get a screenshot, interleaved so drift hits each alike."""
    display = vm.display
    port = vm.endpoints.vnc.rsplit(":", 1)[1]
    vncdo = Path(sys.executable).with_name("vncdo")
    out = Path(tempfile.mkdtemp()) / "shot.png"
    samples: dict[str, list[float]] = {"libvirt_screendump": [], "vnc_persistent": [], "vncdo_spawn": []}
    for _ in range(n):
        samples["libvirt_screendump"] += timed(display.screenshot, 1)
        samples["vnc_persistent"] += timed(display.screenshot_vnc, 1)
        samples["vncdo_spawn"] += timed(lambda: subprocess.run(
            [str(vncdo), "-s", f"127.0.0.1::{port}", "capture", str(out)], check=True, capture_output=True), 1)
    summary = {name: summarize(s) for name, s in samples.items()}
    fastest = min(summary, key=lambda k: summary[k]["median_s"])
    summary["fastest"] = fastest
    summary["vnc_persistent_over_libvirt_median"] = round(
        summary["vnc_persistent"]["median_s"] / summary["libvirt_screendump"]["median_s"], 1)
    return summary


if __name__ == "__main__":
    main()
