"""`cu-run run` and `cu-run validate`: a run around its pool.

Plan the run (suite, agent and image checked before any VM starts: runner.runs.run_plan); open
its pool (this machine's slots, or a cluster's hosts: runner.runs.pool); write provenance; run
the pool; write the summary and the reports. Results are appended as episodes end, so an
interrupted run resumes with --resume and redoes only what has no result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from runner.config import Settings, private_dir
from runner.errors import ExitCode, UsageError
from runner.images.windows_11 import licence_warning
from runner.runs.local_pool import open_local_pool
from runner.runs.pool import Episode, Pool, PoolOpener, PoolRun
from runner.records.provenance import runner_facts
from runner.records.folders import VALIDATION
from runner.records.report import write_reports, write_validation_index
from runner.runs.request import RunRequest
from runner.records.results import LOCAL_HOST, EpisodeRecord, ResultLog, missing, suite_marks, summarize
from runner.runs.run_plan import RunPlan, not_tamper_proof, plan_run
from runner.tasks.model import Suite, TagFilter, Task, load_suite
from runner.tasks.selection import load_selection

EXIT_INFRA = ExitCode.INFRA
EXIT_GATE = ExitCode.GATE


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    summary: dict
    records: list[EpisodeRecord]
    exit_code: int


def run_suite(settings: Settings, request: RunRequest, console: Console,
              open_pool: PoolOpener = open_local_pool) -> RunResult:
    """Runs REQUEST on the pool OPEN_POOL opens (this machine's slots by default; a cluster's hosts
    with runner.cluster.driver.open_cluster_pool): plan, provenance, results, reports, exit code."""
    plan = plan_run(settings, request)
    if (warning := licence_warning(plan.image)) is not None:
        console.print(f"[yellow]{warning}[/]")
    [result] = run_planned(settings, [(plan, request)], console, open_pool,
                           live_title=f"{plan.suite.name} / {plan.agent.name}", live_dir=plan.out_dir)
    return result


@dataclass
class OpenRun:
    """A run whose pool is open: its plan and request, its results, its run.json, what is left."""

    plan: RunPlan
    request: RunRequest
    log: ResultLog
    provenance: dict[str, Any]
    to_go: list[tuple[Task, int]]


def run_planned(settings: Settings, planned: list[tuple[RunPlan, RunRequest]], console: Console,
                open_pool: PoolOpener, *, live_title: str, live_dir: Path,
                opened: Callable[[list[OpenRun]], None] = lambda _runs: None) -> list[RunResult]:
    """The run lifecycle, for one run or a study's arms on one pool: each run's results log and
    what it has left, the pool opened for all, each run's provenance (run.json), the episodes
    interleaved (trial by trial, task by task, run by run), the live view when asked, every
    run's reports however the pool ends, and each run's summary and exit code. OPENED is told
    the runs once their run.json is written (a study writes study.json then)."""
    logs = [ResultLog(plan.out_dir) for plan, _request in planned]
    pool_runs = tuple(PoolRun(plan, request, on_record=lambda r: print_record(console, r)) for plan, request in planned)

    def notice(line: str) -> None:
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)

    with open_pool(settings, pool_runs, notice) as pool:
        runs = []
        for index, ((plan, request), log) in enumerate(zip(planned, logs, strict=True)):
            finished = log.finished()
            private_dir(plan.out_dir)
            provenance = base_provenance(request, plan, pool.where(index))
            write_json(plan.out_dir / "run.json", provenance)
            to_go = [(t, trial) for trial in range(1, request.work.trials + 1) for t in plan.tasks
                     if (t.id, trial) not in finished]
            runs.append(OpenRun(plan, request, log, provenance, to_go))
            console.print(f"run {plan.out_dir}: {len(to_go)} episodes to go "
                          f"({len(plan.tasks)} tasks x {request.work.trials} trials, {len(finished)} done before), "
                          f"{pool.describe()}, agent {plan.agent.name}")
        opened(runs)
        work = interleaved([r.to_go for r in runs], [t.id for t in runs[0].plan.tasks])
        with _live_view(runs, pool, work, console, live_title, live_dir), _finishing_all(runs, console):
            _run_pool(pool, work, console)
        why_lost = pool.lost()
    return [finish_run(r.plan, r.request, r.log, r.provenance, console, why_lost=why_lost) for r in runs]


def interleaved(to_go: list[list[tuple[Task, int]]], task_order: list[str]) -> list[Episode]:
    """Each run's (task, trial) pairs as one pool's work: trial by trial, task by task (in
    TASK_ORDER, then any other), run by run, so drift on the host falls on every run alike."""
    position = {t: i for i, t in enumerate(task_order)}
    work = [(index, task, trial) for index, pairs in enumerate(to_go) for task, trial in pairs]
    return sorted(work, key=lambda w: (w[2], position.get(w[1].id, len(position)), w[0]))


@contextmanager
def _finishing_all(runs: list[OpenRun], console: Console) -> Iterator[None]:
    """finishing() for every run at once: an interrupted study still writes every arm's reports
    (an ExitStack runs each run's exit, whatever an earlier one raised)."""
    with ExitStack() as stack:
        for r in runs:
            stack.enter_context(finishing(r.plan, r.request, r.log, r.provenance, console))
        yield


@contextmanager
def finishing(plan: RunPlan, request: RunRequest, log: ResultLog, provenance: dict, console: Console) -> Iterator[None]:
    """Around a run's pool: an interrupted run says how far it got, and the reports are
    written from what the log holds however the pool ends."""
    planned = plan.planned(request.work.trials)
    try:
        yield
    except KeyboardInterrupt:
        done = len(planned) - len(missing(log.latest(), planned))
        console.print(f"interrupted: {done} of {len(planned)} episodes have a result; "
                      "the same command with --resume continues the run", highlight=False)
        _report(plan, request, log, provenance)
        raise
    except BaseException:
        _report(plan, request, log, provenance)
        raise


def finish_run(plan: RunPlan, request: RunRequest, log: ResultLog, provenance: dict, console: Console,
               why_lost: str | None = None) -> RunResult:
    """The summary, reports and exit code of a run whose pool has ended."""
    records, summary = _report(plan, request, log, provenance)
    _print_summary(console, summary)
    console.print(f"report: {plan.out_dir / 'report.html'}")
    lost = missing(records, plan.planned(request.work.trials))
    exit_code, message = run_exit_code(summary, lost, request.results.fail_under, request.results.gate)
    if lost and why_lost:
        message = f"{why_lost}: {message}"
    if message:
        console.print(f"[bold red]{escape(message)}[/]", highlight=False)
    return RunResult(plan.out_dir, summary, records, exit_code)


def base_provenance(request: RunRequest, plan: RunPlan, where: dict) -> dict:
    """run.json: what ran, plus WHERE it ran; a resumed run keeps the first and notes when and
    where it resumed."""
    started_at = datetime.now(UTC).isoformat()
    if plan.previous:
        plan.previous["resumed_at"].append(started_at)
        plan.previous.setdefault("resumed_where", []).append(where)
        if request.work.adds_tasks:  # a walk's next batch: the run's tasks are all it has tried
            tried = plan.previous["suite"].setdefault("tasks", [])
            tried += [t.id for t in plan.tasks if t.id not in tried]
        return plan.previous
    tasks, image = plan.tasks, plan.image
    return {
        "started_at": started_at,
        **where,
        "image": {"name": image.name, "profile": image.manifest.profile, "sha256": image.manifest.disk_sha256,
                  "builder": image.manifest.builder},
        "suite": {"name": plan.suite.name, "path": str(plan.suite.folder), "content_sha256": plan.suite.content_hash(),
                  "tasks": [t.id for t in tasks], "not_tamper_proof": not_tamper_proof(tasks),
                  "live_state": [t.id for t in tasks if t.spec.desktop_in_verify],
                  # A frozen clock, per task that has one (a task without: the host's time).
                  "clock": {t.id: t.spec.clock.isoformat().replace("+00:00", "Z") for t in tasks if t.spec.clock}},
        "agent": {"name": plan.agent.name, "version": plan.agent.version(), "model": plan.agent.model},
        "runner": runner_facts(),
        "arguments": request.arguments(),
        "network": _network_record(plan),
        "resumed_at": [],
    }


def _live_view(runs: list[OpenRun], pool: Pool, work: list[Episode], console: Console, title: str,
               live_dir: Path) -> AbstractContextManager:
    """The live view of the pool (--live, the first run's options), or nothing."""
    request = runs[0].request
    if not request.where.live:
        return nullcontext()
    from runner.live import LiveOptions, serving

    total = sum(len(r.plan.planned(r.request.work.trials)) for r in runs)
    source = pool.live_source(title, total, total - len(work))
    if source is None:
        raise UsageError("this pool has no live view", fix="drop --live")
    options = LiveOptions(port=request.where.live_port, host=request.where.live_host, control=request.where.live_control)
    return serving(source, options, lambda line: console.print(line, soft_wrap=True, markup=False, highlight=False),
                   run_dir=live_dir)


def _run_pool(pool: Pool, work: list[Episode], console: Console) -> None:
    if work:
        with Live(_status_table(pool), console=console, refresh_per_second=2, transient=True) as live:
            pool.run(work, render=lambda: live.update(_status_table(pool)))


def _report(plan: RunPlan, request: RunRequest, log: ResultLog, provenance: dict) -> tuple[list[EpisodeRecord], dict]:
    """summary.json, the end time in run.json, report.html and junit.xml, from what the log holds."""
    wanted = {t.id for t in plan.tasks}
    records = [r for r in log.latest() if r.task_id in wanted and r.trial <= request.work.trials]
    summary = summarize(records, [t.id for t in plan.tasks], trials=request.work.trials, **suite_marks(provenance["suite"]))
    write_json(plan.out_dir / "summary.json", summary)
    provenance["ended_at"] = datetime.now(UTC).isoformat()
    write_json(plan.out_dir / "run.json", provenance)
    write_reports(plan.out_dir)
    return records, summary


def run_exit_code(summary: dict, lost: list[tuple[str, int]], fail_under: float | None,
                  gate: str) -> tuple[int, str | None]:
    """The run's exit code and what to say about it: 3 when a planned episode has no record or
    ended in an infra error, 4 when --fail-under is missed, else 0."""
    if lost:
        return EXIT_INFRA, f"{len(lost)} planned episodes have no result: " + ", ".join(f"{t} #{n}" for t, n in lost)
    if summary["overall"]["outcomes"]["infra_error"]:
        return EXIT_INFRA, None
    if fail_under is not None and (failed := gate_failure(summary, fail_under, gate)):
        return EXIT_GATE, failed
    return 0, None


def gate_failure(summary: dict, fail_under: float, gate: str) -> str | None:
    """Why the run misses --fail-under, or None. gate 'stable' leaves the flaky tasks out."""
    overall = summary["overall"]
    gated = overall if gate == "all" else overall["stable"]
    rate = gated["rate"] or 0
    if rate >= fail_under:
        return None
    which = "success rate" if gate == "all" else \
        f"success rate of the stable tasks (flaky left out: {', '.join(overall['flaky_tasks']) or 'none'})"
    return f"{which} {gated['rate']} is under --fail-under {fail_under}"


def validate_suite(settings: Settings, request: RunRequest, console: Console,
                   open_pool: PoolOpener = open_local_pool) -> tuple[int, list[str]]:
    """Oracle then nop over the suite: every oracle must pass and every nop must fail."""
    base = (request.results.out or Path("runs") / f"validate-{Path(request.work.suite).name}-{datetime.now(UTC):%Y%m%dT%H%M%S}")
    problems: list[str] = []
    results = {}
    without_oracle = _without_oracle(request)
    for agent, expected in (("oracle", "pass"), ("nop", "fail")):
        changes: dict = {"agent": agent, "out": base / agent, "fail_under": None}
        if agent == "oracle" and without_oracle:
            # Imported tasks may have no oracle of cu-run's yet: the oracle runs where there is one.
            chosen = [t.id for t in chosen_tasks(request) if t.id not in without_oracle]
            if not chosen:
                continue
            changes.update(tasks=tuple(chosen), tags=TagFilter(), selection=None)
        sub = request.with_options(**changes)
        results[agent] = run_suite(settings, sub, console, open_pool)
        for r in results[agent].records:
            if r.outcome != expected:
                problems.append(f"{r.task_id} trial {r.trial}: {agent} gave {r.outcome}"
                                f"{' (' + r.reason + ')' if r.reason else ''}, expected {expected}")
    infra = any(r.exit_code == EXIT_INFRA for r in results.values())
    verdict = {"suite": Path(request.work.suite).name, "valid": not problems and not infra, "problems": problems,
               "infra_errors": infra, "runs": {agent: agent for agent in results},
               "without_oracle": without_oracle,
               "ended_at": datetime.now(UTC).isoformat()}
    write_json(base / VALIDATION, verdict)
    index = write_validation_index(base)
    if without_oracle:
        console.print(f"[yellow]{len(without_oracle)} tasks have no oracle, so only their nop was checked:[/] "
                      + escape(", ".join(without_oracle[:10]) + (", ..." if len(without_oracle) > 10 else "")),
                      highlight=False)
    if problems:
        console.print("[bold red]validation failed:[/]\n  " + "\n  ".join(escape(p) for p in problems))
    else:
        console.print(f"[green]valid:[/] every oracle passed and every nop failed ({base})")
    console.print(f"report: {index}")
    code = EXIT_INFRA if infra else (EXIT_GATE if problems else 0)
    return code, problems


def chosen_tasks(request: RunRequest, suite: Suite | None = None) -> tuple[Task, ...]:
    """The tasks REQUEST names (its tasks, its selection, its tags) in SUITE [default: its suite,
    loaded]: what validate and the audit judge, whichever of them a run then leaves out."""
    work = request.work
    suite = suite or load_suite(work.suite)
    ids = load_selection(work.selection, suite) if work.selection is not None else list(work.tasks)
    return suite.select(ids, work.tags)


def _without_oracle(request: RunRequest) -> list[str]:
    """The chosen tasks with no oracle script (imported tasks cu-run has none for)."""
    return [t.id for t in chosen_tasks(request) if t.script("oracle") is None]


def _network_record(plan: RunPlan) -> dict:
    """run.json's network: the mode, the networked tasks, and the cassettes a replay answered from
    (hashed once, by the plan)."""
    networked = [t.id for t in plan.tasks if t.spec.network is not None]
    return {"mode": str(plan.net.mode), "tasks": networked,
            "cassettes": {task: sha for task, sha in plan.cassettes.items() if task in networked},
            "hosts": plan.net.hosts.record() if plan.net.hosts else None}


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def _status_table(pool: Pool) -> Table:
    slots = pool.status()
    hosts = any(s.host for s in slots)
    table = Table(*(["host"] if hosts else []), "slot", "task", "trial", "phase", "elapsed", title="episodes in flight")
    now = time.monotonic()
    for s in slots:
        table.add_row(*([escape(s.host)] if hosts else []), str(s.slot), escape(s.task_id) or "-", str(s.trial or "-"),
                      escape(s.phase), f"{now - s.since:.0f} s" if s.task_id else "-")
    return table


_STYLE = {"pass": "green", "fail": "red", "timeout": "yellow", "agent_error": "magenta",
          "verifier_error": "bold magenta", "infra_error": "bold red"}


def print_record(console: Console, r: EpisodeRecord) -> None:
    # The reason may quote what the guest printed: it is text, never markup.
    reason = f" {escape(r.reason)}" if r.reason else ""
    console.print(f"[{_STYLE[r.outcome]}]{r.outcome:>14}[/] {escape(r.task_id)} #{r.trial} "
                  f"({'' if r.host == LOCAL_HOST else r.host + ' '}slot {r.slot}, {r.duration_s:.0f} s){reason}", highlight=False)


def _print_summary(console: Console, summary: dict) -> None:
    table = Table("task", "passes/scored", "rate [95% CI]", "checkpoints", "violations", "timeout", "agent_error",
                  "verifier_error", "infra_error")
    for task_id, c in list(summary["tasks"].items()) + [("overall", summary["overall"])]:
        o = c["outcomes"]
        rate = "-" if c["rate"] is None else f"{c['rate']:.2f} [{c['wilson95'][0]:.2f}, {c['wilson95'][1]:.2f}]"
        if c.get("flaky"):
            rate += " flaky"
        progress = "-" if c["checkpoint_progress"] is None else f"{c['checkpoint_progress']:.2f}"
        table.add_row(escape(task_id), f"{c['passes']}/{c['scored']}", rate, progress, str(c["violations"]),
                      str(o["timeout"]), str(o["agent_error"]), str(o["verifier_error"]), str(o["infra_error"]))
    console.print(table)
    if (complete := summary.get("completeness")) and complete["missing"]:
        shown = ", ".join(complete["missing"][:8]) + (", ..." if len(complete["missing"]) > 8 else "")
        console.print(f"[bold yellow]incomplete:[/] {complete['done']} of {complete['planned']} planned episodes have "
                      f"a result; {len(complete['missing'])} missing ({escape(shown)}); --resume finishes the run",
                      highlight=False)
    overall = summary["overall"]
    for task_id, trials in overall.get("task_defects", {}).items():
        console.print(f"[bold magenta]task defect:[/] {escape(task_id)}: its verifier could not decide "
                      f"({escape('; '.join(trials))}); left out of the rate", highlight=False)
    if overall.get("live_state_tasks"):
        console.print("[yellow]verified from live desktop state:[/] what ran before the agent answered the verifier in "
                      + ", ".join(map(escape, overall["live_state_tasks"])), highlight=False)
    if overall.get("not_tamper_proof_tasks"):
        console.print("[yellow]not tamper-proof:[/] the agent had admin rights in "
                      + ", ".join(map(escape, overall["not_tamper_proof_tasks"])), highlight=False)
