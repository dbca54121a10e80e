"""Guest agent benchmark: what a window-list tool call costs, cold and warm, side by side.

    python bench/guest_agent.py [--n 10] [--against OTHER_AGENT.py]

On restored linux-test VMs (the user's cache, warm slot 0). The image's own agent answers
`windows` through the episode's shell, as computer_use_windows does. With --against, a
second agent script (another version of guest_agent/linux/cu_guest_agent.py) is copied into
the guest and the two take turns: each is first on a VM of its own, for its cold call, and
both must print the same JSON. Prints the cold first call and the warm medians.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, summarize

from runner.config import Settings
from runner.images.linux_images import GUEST_AGENT_COMMAND
from runner.runs.session import open_vm

OTHER = "/tmp/cu-bench-agent.py"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10, help="warm calls per agent")
    parser.add_argument("--against", type=Path, help="another agent script to compare with the image's")
    args = parser.parse_args()
    commands = {"image": f"{GUEST_AGENT_COMMAND} windows"}
    if args.against:
        commands["other"] = f"DISPLAY=:0 python3 {OTHER} windows"
    cold: dict[str, float] = {}
    warm: dict[str, list[float]] = {name: [] for name in commands}
    for first in commands:  # each agent once first on a fresh VM: its cold call
        with open_vm(Settings.resolve(), "linux-test") as vm:
            if args.against:
                payload = base64.b64encode(args.against.read_bytes()).decode()
                vm.admin_shell.run(f"echo {payload} | base64 -d > {OTHER}; chmod 644 {OTHER}", timeout=60)
            order = [first, *(name for name in commands if name != first)]
            answers = {}
            for turn in range(args.n // len(commands) + 1):
                for name in order:
                    started = time.perf_counter()
                    result = vm.shell.run(commands[name], timeout=60)
                    took = time.perf_counter() - started
                    if result.exit_code != 0:
                        sys.exit(f"the {name} agent failed: {result.stderr.strip()}")
                    answers[name] = json.loads(result.stdout)
                    if turn == 0 and name == first:
                        cold[name] = round(took, 3)
                    elif turn > 0:
                        warm[name].append(took)
            if len({json.dumps(a, sort_keys=True) for a in answers.values()}) != 1:
                sys.exit(f"the agents disagree: {answers}")
    results = {"cold_first_call_s": cold, "warm": {name: summarize(s) for name, s in warm.items()}}
    if args.against:
        results["warm_median_image_over_other"] = round(
            results["warm"]["image"]["median_s"] / results["warm"]["other"]["median_s"], 2)
    emit("guest_agent_windows", results)


if __name__ == "__main__":
    main()
