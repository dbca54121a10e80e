"""What round three's checks cost an episode: the write-set listing with extended attributes
(ACLs) against the listing without them, and the desktop_in_verify quarantine with its
starters stopped and bus services hidden against the one without, alternated in one VM.

    python bench/trust_checks.py [--n 10] [--image linux-test]

The round-two variants are the same scripts with round three's parts taken out, so the
difference is exactly what round three added. Prints one JSON object: per variant the
timings, and the growth of each median in seconds (the issue's bound: 1 s an episode).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize  # noqa: E402

from runner.config import Settings  # noqa: E402
from runner.profiles import get_profile, linux  # noqa: E402
from runner.scoring.quarantine import user_processes  # noqa: E402
from runner.scoring.writeset import Watch  # noqa: E402
from runner.session import open_vm  # noqa: E402


def variants(vm) -> dict[str, str]:
    profile, user = get_profile("linux"), vm.desktop_user
    listing = profile.list_script(Watch((user.home,), tuple(p.replace("~", user.home, 1)
                                                              for p in profile.default_ignore)))
    keep = user_processes(vm.admin_shell, user, profile)
    quarantine = profile.quarantine_script(user, keep)
    without = (quarantine.replace(linux._STOP_STARTERS, "starters=' '; bus=0\n")
               .replace(linux._hide_bus_services(user), "hidden=\n").replace(linux._reload_bus(user), ""))
    return {"listing_round_two": listing.replace("attributes(path)))", '"-"))'),
            "listing_round_three": listing,
            "quarantine_round_two": without,
            "quarantine_round_three": quarantine}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10, help="runs of each variant")
    parser.add_argument("--image", default="linux-test")
    args = parser.parse_args()
    with open_vm(Settings.resolve(), args.image) as vm:
        scripts = variants(vm)
        if len(set(scripts.values())) != len(scripts):
            sys.exit("a round-two variant is the same script as round three's: the bench is out of date")
        samples: dict[str, list[float]] = {name: [] for name in scripts}
        for turn in range(args.n + 1):  # the first turn warms TCG's translation, and is not counted
            for name, script in scripts.items():
                started = time.perf_counter()
                result = vm.admin_shell.run(script, timeout=120)
                took = time.perf_counter() - started
                if result.exit_code != 0:
                    sys.exit(f"{name} failed (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
                if turn:
                    samples[name].append(took)
    results = {name: summarize(s) for name, s in samples.items()}
    results["growth_median_s"] = {
        part: round(results[f"{part}_round_three"]["median_s"] - results[f"{part}_round_two"]["median_s"], 3)
        for part in ("listing", "quarantine")}
    emit("trust_checks", results)


if __name__ == "__main__":
    main()
