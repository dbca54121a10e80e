"""Cluster benchmark: the same warm oracle suite on one machine two ways, side by side in one run.

    python bench/cluster.py [--tasks a,b,...] [--rounds 1]

- local: `cu-run run --vm-pool 2`;
- cluster: through `cu-run cluster local --hosts 2 --slots 1` (a Ray head, two Ray nodes,
  each a cu-run host with its own cache), same machine, same VM count.

Both start warm: the local warm states (2 slots) and each host's (image sent and warmed
before timing). Rounds alternate the order (local first, then cluster first) so a drift of
the machine's speed does not favour one. Prints one JSON object: wall time and throughput
of each, the ratio cluster/local (target >= 0.85), and Ray's overhead per episode: the
median `dispatch` phase (the driver's round trip beyond the host's own episode time:
dispatch, result and artifacts back) and the wall time the cluster added per episode.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit

from runner.config import Settings
from runner.runs.scope import ScopeRequest, open_scope
from runner.vm.warming import warm_image


def cu_run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner", *args], capture_output=True, text=True,
                          env={**(env or os.environ), "COLUMNS": "300"})


def timed_run(label: str, out: Path, tasks: str, extra: list[str], env: dict | None = None) -> dict:
    args = ["run", "--suite", "linux-core", "--agent", "oracle", "--start", "warm", "--out", str(out), *extra]
    if tasks:
        args += ["--tasks", tasks]
    started = time.perf_counter()
    result = cu_run(*args, env=env)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{label} run failed ({result.returncode}):\n{result.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {"wall_s": wall, "episodes": len(records), "passes": sum(r["outcome"] == "pass" for r in records),
            "dispatch_s": [r["phases"]["dispatch"] for r in records if "dispatch" in r["phases"]],
            "episode_s": [r["duration_s"] for r in records]}


def start_cluster(folder: Path) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([sys.executable, "-m", "runner", "cluster", "local", "--hosts", "2", "--slots", "1",
                             "--dir", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 300)
    if not ready:
        proc.kill()
        raise SystemExit("cluster local did not start in 300 s")
    return proc, json.loads(proc.stdout.readline())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default="", help="comma-separated subset of linux-core [default: all]")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    settings = Settings.resolve()
    with open_scope(settings, ScopeRequest("linux-test", start="cold", vm_pool=2)) as scope:
        warm_image(scope.host, settings, scope.image, 2, scope.accel, progress=lambda _line: None)

    samples: dict[str, list[dict]] = {"local": [], "cluster": []}
    with tempfile.TemporaryDirectory() as tmp:
        proc, cluster = start_cluster(Path(tmp) / "cluster")
        env = {**os.environ, "RAY_AUTH_TOKEN_PATH": cluster["token_file"]}
        try:
            warmed = cu_run("image", "warm", "linux-test", "--cluster", cluster["address"], env=env)
            if warmed.returncode != 0:
                raise SystemExit(f"warming the cluster failed:\n{warmed.stderr[-3000:]}")
            for n in range(args.rounds):
                order = ["local", "cluster"] if n % 2 == 0 else ["cluster", "local"]
                for way in order:
                    extra = ["--vm-pool", "2"] if way == "local" else ["--cluster", cluster["address"]]
                    samples[way].append(timed_run(way, Path(tmp) / f"{way}-{n}", args.tasks, extra, env))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=300)

    def total(way: str, key: str) -> float:
        return sum(s[key] for s in samples[way])

    throughput = {w: total(w, "episodes") / total(w, "wall_s") for w in samples}
    episodes = total("cluster", "episodes")
    dispatch = [d for s in samples["cluster"] for d in s["dispatch_s"]]
    emit("cluster", {
        "suite": "linux-core", "agent": "oracle", "rounds": args.rounds, "vms": 2,
        "local_pool_2": {"wall_s": round(total("local", "wall_s"), 1), "episodes": total("local", "episodes"),
                         "passes": total("local", "passes"), "episodes_per_min": round(60 * throughput["local"], 2),
                         "median_episode_s": round(statistics.median(e for s in samples["local"] for e in s["episode_s"]), 2)},
        "cluster_2_hosts_x_1_slot": {"wall_s": round(total("cluster", "wall_s"), 1), "episodes": episodes,
                                      "passes": total("cluster", "passes"),
                                      "episodes_per_min": round(60 * throughput["cluster"], 2),
                                      "median_episode_s": round(statistics.median(
                                          e for s in samples["cluster"] for e in s["episode_s"]), 2)},
        "throughput_ratio_cluster_over_local": round(throughput["cluster"] / throughput["local"], 3),
        "target_ratio": 0.85,
        "ray_overhead_per_episode": {
            "median_dispatch_s": round(statistics.median(dispatch), 3) if dispatch else None,
            "max_dispatch_s": round(max(dispatch), 3) if dispatch else None,
            "added_wall_s": round((total("cluster", "wall_s") - total("local", "wall_s")) / max(episodes, 1), 2),
        },
    })


if __name__ == "__main__":
    main()
