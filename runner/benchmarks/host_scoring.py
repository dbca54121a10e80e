"""Host scoring of an imported task's episode: collect in the guest, score on the host.

After the agent, with what it started killed and the apps the setup opened still running
(desktop_in_verify), the task's collect script runs through the admin channel: upstream's
postconfig (its Ctrl+S), then each getter's gathering into the export folder, packed as a tar.
The runner pulls the tar (its size checked first), unpacks it into the episode's `collected/`
folder (runner.benchmarks.pull) and scores it in the sandbox (runner.benchmarks.sandbox) with
the benchmark's metric functions. The score is the metric's float: a pass is exactly 1.0, as
upstream counts it; each metric of a task with several is a checkpoint, for partial credit.

What the guest offers can be made by the agent: anything too big, unreadable or odd in it is
the agent's fail, never an error that leaves the episode out of the rate. Only a metric that
crashes or runs out of time is a verifier_error (its traceback in scoring.log): the task's or
the benchmark's defect.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.benchmarks import registry
from runner.assets import AssetStore, assets_root, missing_fix
from runner.benchmarks.task_assets import task_assets, urls_of
from runner.benchmarks.pull import MAX_TOTAL, CollectedRejected, unpack
from runner.benchmarks.sandbox import Limits, Scoring, run_scorer
from runner.benchmarks.score_entry import metric_modules
from runner.benchmarks.scoring_env import LEFT_OUT, ScoringEnv, ensure_env
from runner.errors import CommandTimeout, UsageError
from runner.guest.base import GuestShell
from runner.profiles import DesktopUser
from runner.scoring.verdict import Verdict
from runner.tasks.model import UPSTREAM_FILE, Task
from runner.tasks.scripts import run_privileged

COLLECTED = "collected"
EPISODE_UPSTREAM = "upstream.json"  # the task's evaluator, kept with the episode for a rescore
SCORING_JSON = "scoring.json"
SCORING_LOG = "scoring.log"


@dataclass(frozen=True)
class HostScoring:
    """What a run's host-scored episodes share: the scoring env and the asset store's blobs."""

    env: ScoringEnv
    assets: dict[str, Path] = field(default_factory=dict)  # url -> its blob
    limits: Limits = Limits()

    def provenance(self) -> dict[str, Any]:
        return {**self.env.provenance(), "assets": len(self.assets)}


def prepare(cache_dir: Path, tasks: tuple[Task, ...], assets: Path | None, evaluators: str | None,
            suite: str, say: Callable[[str], None] = lambda _m: None) -> HostScoring | None:
    """The run's HostScoring, or None when no task is host-scored. Refuses, naming each, the
    assets missing from the store and the metrics the scoring env cannot run (see unscorable)."""
    host_tasks = [t for t in tasks if t.spec.scoring == "host"]
    if not host_tasks:
        return None
    urls = sorted({u for t in host_tasks for u in task_assets(t).all})
    found: dict[str, Path] = {}
    if urls:
        root = assets_root(assets)
        if root is None:
            users = [t.id for t in host_tasks if task_assets(t).all]
            raise UsageError(f"{len(users)} tasks download {len(urls)} files (inputs and gold files), and no asset "
                             f"store was given: {', '.join(users[:5])}{', ...' if len(users) > 5 else ''}",
                             fix=missing_fix(suite))
        found, problems = AssetStore(root).resolve(urls)
        if problems:
            raise UsageError(f"the asset store lacks {len(problems)} of the {len(urls)} files the tasks need:\n  "
                             + "\n  ".join(problems[:20]) + ("\n  ..." if len(problems) > 20 else ""),
                             fix=missing_fix(suite))
    env = ensure_env(cache_dir, evaluators, say=say)
    return HostScoring(env, found)


GUEST_ASSETS = "assets"  # in the staged task folder: setup's downloads, and their index (osw_download)


def setup_inputs(scoring: HostScoring, task: Task) -> dict[str, bytes]:
    """The files setup's downloads read, staged with the task for setup alone: assets/<sha256>
    each, and assets/index, a line "SHA256 URL" each. Gold files never go in: only the host's
    scoring reads them."""
    files, index = {}, []
    for url in task_assets(task).guest:
        blob = scoring.assets[url]
        files[f"{GUEST_ASSETS}/{blob.name}"] = blob.read_bytes()
        index.append(f"{blob.name} {url}\n")
    if index:
        files[f"{GUEST_ASSETS}/index"] = "".join(index).encode()
    return files


def unscorable(scoring: HostScoring, tasks: tuple[Task, ...]) -> dict[str, list[str]]:
    """{task id: why} for each host-scored task whose metric the scoring env cannot run: one the
    benchmark's code lacks, or one that uses a module the env leaves out. Never scored some
    other way: a run leaves them out, or refuses them when named."""
    found: dict[str, list[str]] = {}
    for problem in metric_problems(scoring.env, [t for t in tasks if t.spec.scoring == "host"]):
        task_id, reason = problem.split(": ", 1)
        if reason not in found.setdefault(task_id, []):
            found[task_id].append(reason)
    return found


def metrics_of(task: Task) -> list[str]:
    func = upstream(task).get("evaluator", {}).get("func")
    return [str(f) for f in (func if isinstance(func, list) else [func]) if f]


def upstream(task: Task) -> dict[str, Any]:
    return json.loads((task.folder / UPSTREAM_FILE).read_bytes())


def metric_problems(env: ScoringEnv, tasks: list[Task]) -> list[str]:
    """Why each task's metrics cannot run in ENV: a metric the benchmark's code lacks, or one that
    uses a module the env leaves out. Never scored some other way."""
    modules = metric_modules(str(env.package_root))
    uses = _left_out_uses(env, modules)
    problems = []
    for task in tasks:
        for name in metrics_of(task):
            if name not in modules:
                problems.append(f"{task.id}: metric {name} is not in {env.version}")
            elif name in uses:
                problems.append(f"{task.id}: metric {name} needs {uses[name]}, which the scoring venv leaves out "
                                f"({LEFT_OUT[uses[name]]})")
    return problems


def _left_out_uses(env: ScoringEnv, modules: dict[str, str]) -> dict[str, str]:
    """{metric: left-out module} for each metric whose body uses one (read from its source)."""
    import ast

    found: dict[str, str] = {}
    metrics = env.package_root / "desktop_env" / "evaluators" / "metrics"
    for module in sorted(set(modules.values())):
        path = metrics / f"{module}.py"
        if not path.is_file():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                for left_out in LEFT_OUT:
                    if left_out in names:
                        found[node.name] = left_out
    return found


def steps_of(task: Task) -> ModuleType:
    """TASK's benchmark's guest side: where its collector packs the export, how its size is asked."""
    assert task.spec.source is not None  # a host-scored task has a source (TaskSpec checks)
    return registry.get(task.spec.source.bench).steps


def collect_and_score(scoring: HostScoring, admin: GuestShell, task: Task, user: DesktopUser,
                      ep_dir: Path) -> tuple[Verdict, dict[str, Any], dict[str, bool]]:
    """Runs TASK's collector in the guest, pulls and scores what it gathered. Returns the verdict,
    what the episode's verifier record says of it, and the checkpoints (one per metric when
    the task has several)."""
    log = ep_dir / "collect.log"
    try:
        ran = run_privileged(admin, task, "collect", user, "collect", timeout=task.spec.verify_timeout_s)
    except CommandTimeout as exc:
        log.write_text(f"timed out\n--- stdout\n{exc.stdout}\n--- stderr\n{exc.stderr}")
        return _error(f"the collector timed out: {exc.message}")
    assert ran is not None
    log.write_text(f"exit {ran.exit_code}\n--- stdout\n{ran.stdout}\n--- stderr\n{ran.stderr}")
    archive = steps_of(task).EXPORT_DIR + ".tar"
    with tempfile.TemporaryDirectory(prefix="cu-run-pull-") as work:
        local = Path(work) / "export.tar"
        size = _remote_size(admin, task, archive)
        if size is None:
            return _error(f"the collector left no {archive} (exit {ran.exit_code}; collect.log)")
        if size > MAX_TOTAL + 2**20:
            return _fail(f"the collected output is {size} bytes, over the {MAX_TOTAL // 2**20} MiB bound")
        admin.get(archive, local)
        target = ep_dir / COLLECTED
        if target.exists():
            shutil.rmtree(target)
        try:
            unpacked = unpack(local, target)
        except CollectedRejected as exc:
            return _fail(f"the collected output was refused: {exc}")
    if unpacked.skipped:
        (ep_dir / "collected-skipped.txt").write_text("\n".join(unpacked.skipped) + "\n")
    return score_collected(scoring, task, ep_dir)


def score_collected(scoring: HostScoring, task: Task, ep_dir: Path) -> tuple[Verdict, dict[str, Any], dict[str, bool]]:
    """Scores what ep_dir/collected holds, with TASK's evaluator, kept beside it for a rescore."""
    shutil.copyfile(task.folder / UPSTREAM_FILE, ep_dir / EPISODE_UPSTREAM)
    return score_collected_from(scoring, upstream(task), ep_dir, clock=task.spec.clock)


def score_collected_from(scoring: HostScoring, data: dict[str, Any], ep_dir: Path, *,
                         clock: datetime | None = None) -> tuple[Verdict, dict[str, Any], dict[str, bool]]:
    """Scores what ep_dir/collected holds with the evaluator of DATA (an upstream task file), at the
    task's frozen CLOCK when it has one."""
    evaluator = data["evaluator"]
    gold = {u: scoring.assets[u] for u in urls_of(data).host}
    collected = ep_dir / COLLECTED
    result = run_scorer(scoring.env.python, scoring.env.package_root, evaluator,
                        collected if collected.is_dir() else None, gold, scoring.env.left_out, scoring.limits,
                        clock=clock)
    return _verdict(result, scoring, ep_dir)


def _verdict(result: Scoring, scoring: HostScoring, ep_dir: Path) -> tuple[Verdict, dict[str, Any], dict[str, bool]]:
    record = {"score": result.score, "metrics": result.metrics, "error": result.error,
              "seconds": round(result.seconds, 3), "evaluators": scoring.env.provenance()}
    (ep_dir / SCORING_JSON).write_text(json.dumps(record, indent=2) + "\n")
    (ep_dir / SCORING_LOG).write_text((result.traceback or "") + "\n--- stderr\n" + result.stderr)
    if result.score is None:
        verdict = Verdict("error", f"the metric failed: {result.error}")
    elif result.score == 1.0:
        verdict = Verdict("pass", "")
    else:
        parts = ", ".join(f"{m.get('func')} {float(m.get('score', 0)):g}" for m in result.metrics)
        verdict = Verdict("fail", f"score {result.score:g}" + (f" ({parts})" if parts else ""))
    checkpoints = {f"metric-{i + 1}-{m.get('func')}": float(m.get("score", 0)) == 1.0
                   for i, m in enumerate(result.metrics)} if len(result.metrics) > 1 else {}
    details = {"exit_code": None, "verdict": verdict.kind, "reason": verdict.reason, "channel": "host",
               "score": result.score}
    return verdict, details, checkpoints


def _remote_size(admin: GuestShell, task: Task, path: str) -> int | None:
    done = admin.run(steps_of(task).size_script(path), timeout=30)
    text = done.stdout.strip()
    return int(text) if done.ok and text.isdigit() else None


def _error(reason: str) -> tuple[Verdict, dict[str, Any], dict[str, bool]]:
    return Verdict("error", reason), {"exit_code": None, "verdict": "error", "reason": reason, "channel": "host"}, {}


def _fail(reason: str) -> tuple[Verdict, dict[str, Any], dict[str, bool]]:
    return Verdict("fail", reason), {"exit_code": None, "verdict": "fail", "reason": reason, "channel": "host"}, {}
