"""What round three's checks cost an episode, alternated in one VM: the write-set listing with
extended attributes (ACLs) against the listing without them, and read from the disk on the
host with the guest frozen (what an episode does after the agent, where the guest agent is the
admin channel); the desktop_in_verify quarantine with its starters stopped, bus services hidden
and X sweep against the one without.

    python bench/trust_checks.py [--n 10] [--image linux-test]

The round-two variants are the same scripts with round three's parts taken out, so the
difference is exactly what round three added. Prints one JSON object: per variant the
timings, and the growth of each median in seconds (the issue's bound: 1 s an episode).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.config import Settings
from runner.guest.qga import QemuAgentShell
from runner.hypervisor.qcow2_reader import DiskImage
from runner.profiles import get_profile
from runner.profiles.linux import quarantine_steps
from runner.scoring.disk_listing import list_disk
from runner.scoring.ext4_reader import Ext4
from runner.scoring.quarantine import user_processes
from runner.profiles.listing import Watch
from runner.runs.session import open_vm
from runner.profiles.parts import Quarantine
from runner.profiles.listing import WriteSetLister


def variants(vm) -> dict[str, Callable[[], object]]:
    profile, user = get_profile("linux"), vm.desktop_user
    watch = Watch((user.home,), tuple(p.replace("~", user.home, 1) for p in profile.part(WriteSetLister).default_ignore))
    listing = profile.part(WriteSetLister).list_script(watch)
    keep = user_processes(vm.admin_shell, user, profile)
    quarantine = profile.part(Quarantine).quarantine_script(user, keep)
    # Round two's quarantine: round three's steps, with the ones round three added made no-ops.
    without = quarantine_steps(user, keep) + ("stop_starters() { starters=' '; bus=0; }\n"
                                              "hide_bus_services() { hidden=; }\nreload_bus() { :; }\n"
                                              "x_sweep() { :; }\nkill_new\n")
    scripts = {"listing_round_two": listing.replace("{attributes(path)}", "-"),
               "listing_round_three": listing,
               "quarantine_round_two": without,
               "quarantine_round_three": quarantine}
    if len(set(scripts.values())) != len(scripts):
        sys.exit("a round-two variant is the same script as round three's: the bench is out of date")
    out: dict[str, Callable[[], object]] = {name: partial(_run, vm, name, script) for name, script in scripts.items()}
    disk = vm.workdir / "overlay.qcow2"
    if isinstance(vm.admin_shell, QemuAgentShell) and disk.is_file():
        # The listing read from the disk, the guest frozen meanwhile: what round three does instead.
        out["listing_from_disk"] = partial(_read_disk, vm.admin_shell, disk, watch)
    return out


def _run(vm, name: str, script: str) -> None:
    result = vm.admin_shell.run(script, timeout=120)
    if result.exit_code != 0:
        sys.exit(f"{name} failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")


def _read_disk(admin: QemuAgentShell, disk: Path, watch: Watch) -> None:
    admin.freeze_filesystems()
    try:
        with DiskImage(disk) as image:
            list_disk(Ext4(image.read), watch)
    finally:
        admin.thaw_filesystems()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10, help="runs of each variant")
    parser.add_argument("--image", default="linux-test")
    args = parser.parse_args()
    with open_vm(Settings.resolve(), args.image) as vm:
        actions = variants(vm)
        samples: dict[str, list[float]] = {name: [] for name in actions}
        for turn in range(args.n + 1):  # the first turn warms TCG's translation, and is not counted
            for name, action in actions.items():
                started = time.perf_counter()
                action()
                if turn:
                    samples[name].append(time.perf_counter() - started)
    results: dict = {name: summarize(s) for name, s in samples.items()}
    results["growth_median_s"] = {
        part: round(results[f"{part}_round_three"]["median_s"] - results[f"{part}_round_two"]["median_s"], 3)
        for part in ("listing", "quarantine")}
    if "listing_from_disk" in results:
        results["growth_median_s"]["listing_from_disk_over_round_two"] = round(
            results["listing_from_disk"]["median_s"] - results["listing_round_two"]["median_s"], 3)
    emit("trust_checks", results)


if __name__ == "__main__":
    main()
