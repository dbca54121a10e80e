"""What round four's evidence rule and exec audit cost an episode. The rule: the write set's
folders listed a second time, after the verifier, the same way as after the stop
(runner.scoring.evidence). Alternated in one VM: the listing after the stop (read from the disk
on the host, the guest frozen, as an episode on an image with the guest agent does; and by the
guest's lister, as over SSH), then the second listing of the same folders, which hashes only what
changed since the first. The exec audit (runner.scoring.turn_programs), for a task with a `ran:`
rule: the mark before the agent's turn, and after a command of the user's, the read after the stop.

    python bench/evidence_rule.py [--n 10] [--image linux-test]

Prints one JSON object: per variant the timings, and what the two add to an episode (the
second listing's median, and the mark's and the read's; the issue's bound: 1 s together).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.config import Settings
from runner.profiles.listing import Listing, Watch, WriteSetLister, expand, take_listing
from runner.runs.session import open_vm
from runner.scoring.quarantine import read_disk_listing
from runner.scoring.turn_programs import mark_turn, read_turn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10, help="runs of each variant")
    parser.add_argument("--image", default="linux-test")
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    with open_vm(Settings.resolve(), args.image) as vm:
        lister = vm.image.manifest.guest.needs(WriteSetLister, "the bench")
        home = vm.desktop_user.home
        watch = Watch(tuple(expand(r, home) for r in lister.default_watch),
                      tuple(expand(p, home) for p in lister.default_ignore))
        freezer = vm.admin_shell.freezer()
        disk = vm.workdir / "overlay.qcow2"
        ways = {"guest": lambda w: take_listing(vm.admin_shell, lister, w)}
        if freezer is not None and disk.is_file():
            ways["disk"] = lambda w: read_disk_listing(freezer, w, disk)
        for turn in range(args.n + 1):  # the first turn warms TCG's translation, and is not counted
            for way, listed in ways.items():
                started = time.perf_counter()
                first: Listing = listed(watch)
                middle = time.perf_counter()
                listed(watch.after(first))
                ended = time.perf_counter()
                if turn:
                    samples.setdefault(f"after_stop_{way}", []).append(middle - started)
                    samples.setdefault(f"after_verify_{way}", []).append(ended - middle)
            started = time.perf_counter()
            mark = mark_turn(vm.admin_shell, vm.image.manifest.guest)
            marked = time.perf_counter()
            vm.shell.run("ls -l / >/dev/null", timeout=30)  # a program of the user's in the turn
            read_started = time.perf_counter()
            log = read_turn(vm.admin_shell, vm.image.manifest.guest, mark, disk)
            read_ended = time.perf_counter()
            assert log.incomplete is None and log.execs, log
            if turn:
                samples.setdefault("exec_audit_mark", []).append(marked - started)
                samples.setdefault("exec_audit_read", []).append(read_ended - read_started)
    results: dict = {name: summarize(s) for name, s in samples.items()}
    results["added_per_episode_median_s"] = {
        way: results[f"after_verify_{way}"]["median_s"] for way in ("disk", "guest") if f"after_verify_{way}" in results}
    audit = results["exec_audit_mark"]["median_s"] + results["exec_audit_read"]["median_s"]
    results["with_the_exec_audit_median_s"] = {way: round(added + audit, 3)
                                               for way, added in results["added_per_episode_median_s"].items()}
    emit("evidence_rule", results)


if __name__ == "__main__":
    main()
