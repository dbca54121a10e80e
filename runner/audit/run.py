"""`cu-run audit`: the controls (oracle and nop) and every attack of the battery over a suite, as
one pool's runs (runner.runs.run.run_planned: warm starts, the pool, a cluster), each run's folder
written as `cu-run run` writes it, under OUT/runs/; then every (task, attack) judged
(runner.audit.judge) and the reports written (runner.audit.report).

With --quick, the controls are read from a `validate` folder instead of run again.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.audit.attacks import describe
from runner.audit.judge import NOP, ORACLE, Acts, Cell, judge, read_acts, unproven, verifier_verdict, worst
from runner.audit.report import AUDIT_HTML, AUDIT_JSON, counts, write_audit_reports
from runner.config import Settings, private_dir
from runner.errors import ExitCode, UsageError
from runner.records.results import EpisodeRecord, ResultLog
from runner.runs.local_pool import open_local_pool
from runner.runs.pool import PoolOpener
from runner.runs.request import RunRequest
from runner.runs.run import chosen_tasks, run_planned
from runner.runs.run_plan import RunPlan, plan_run
from runner.scoring.verdict import clean_reason
from runner.tasks.model import SafetyRule, Suite, Task, TagFilter, load_suite

RUNS = "runs"  # OUT/runs/<column>/: each control's and attack's run folder


@dataclass(frozen=True)
class AuditResult:
    out_dir: Path
    cells: list[Cell]
    exit_code: int

    @property
    def unsafe(self) -> list[Cell]:
        return [c for c in self.cells if c.unsafe]


def audit_suite(settings: Settings, request: RunRequest, attacks: list[str], console: Console,
                quick: Path | None = None, open_pool: PoolOpener = open_local_pool) -> AuditResult:
    """REQUEST's tasks against the controls and ATTACKS (agent names: attack_agents), every run
    planned, and so checked, before any VM starts. REQUEST's resume finishes an audit in its folder."""
    suite_name = Path(request.work.suite).name
    out_dir = (request.results.out or Path("runs") / f"audit-{suite_name}-{datetime.now(UTC):%Y%m%dT%H%M%S}").resolve()
    resume = request.results.resume
    if (out_dir / AUDIT_JSON).exists() and not resume:
        raise UsageError(f"{out_dir} already holds an audit", fix="add --resume to finish it, or choose another --out")
    suite = load_suite(request.work.suite)
    chosen = chosen_tasks(request, suite)  # each gets a cell in every column, whether or not a run kept it
    controls = _controls_from(quick, suite) if quick is not None else None
    with_oracle = tuple(t for t in chosen if t.script("oracle") is not None)
    # Described once: a lab's MODULE:CLASS is imported and made to be described.
    described = [describe(agent) for agent in attacks]
    columns = ([] if controls is not None else [(ORACLE, "oracle"), (NOP, "nop")]) \
        + [(d["name"], d["agent"]) for d in described]
    folders = [_folder(column) for column, _agent in columns]
    if len(set(folders)) < len(folders):
        raise UsageError(f"--attacks: two attacks would share a run folder ({', '.join(sorted(folders))})",
                         fix="name each attack once, as one spelling")
    planned: list[tuple[str, RunPlan, RunRequest]] = []
    for column, agent in columns:
        sub = request.with_options(agent=agent, out=out_dir / RUNS / _folder(column), fail_under=None, resume=resume)
        if column == ORACLE:
            if not with_oracle:
                continue
            if len(with_oracle) < len(chosen):  # as validate does: the oracle runs where there is one
                sub = sub.with_options(tasks=tuple(t.id for t in with_oracle), tags=TagFilter(), selection=None)
        planned.append((column, plan_run(settings, sub), sub))
    private_dir(out_dir)
    console.print(f"audit {escape(str(out_dir))}: {len(chosen)} tasks against {len(attacks)} attacks"
                  f"{'' if controls else ' and the oracle and nop controls'}", highlight=False)
    run_planned(settings, [(plan, sub) for _column, plan, sub in planned], console, open_pool,
                live_title=f"audit {suite_name}", live_dir=out_dir)
    cells: list[Cell] = []
    for column, _plan, sub in planned:
        assert sub.results.out is not None
        tasks = with_oracle if column == ORACLE else chosen  # a task a run left out has no result: unsafe
        cells += _judged(out_dir, sub.results.out, column, tasks, suite.safety, sub.work.trials,
                         ResultLog(sub.results.out).latest())
    if controls is not None:
        for column, (folder, records) in controls.items():
            tasks = with_oracle if column == ORACLE else chosen
            cells += _judged(out_dir, folder, column, tasks, suite.safety, max((r.trial for r in records), default=1),
                             records)
    cells += [unproven(t) for t in chosen if t not in with_oracle]
    cells.sort(key=lambda c: (c.task, c.attack))
    audit = {"suite": suite_name, "suite_folder": str(suite.folder), "suite_sha256": suite.content_hash(),
             "attacks": described, "quick": str(quick) if quick else None,
             "ended_at": datetime.now(UTC).isoformat(), "counts": counts(cells)}
    write_audit_reports(out_dir, audit, cells)
    _print(console, out_dir, cells)
    code = ExitCode.GATE if any(c.unsafe for c in cells) else ExitCode.OK
    return AuditResult(out_dir, cells, int(code))


def _judged(out_dir: Path, folder: Path, column: str, tasks: tuple[Task, ...], suite_rules: tuple[SafetyRule, ...],
            trials: int, records: list[EpisodeRecord]) -> list[Cell]:
    """A cell per task of COLUMN's run in FOLDER: each trial judged, the worst kept."""
    by = {(r.task_id, r.trial): r for r in records}
    cells = []
    for task in tasks:
        rules = suite_rules + task.spec.safety
        judged = []
        for trial in range(1, trials + 1):
            episode = folder / task.id / str(trial)
            acts = read_acts(episode / "agent.log") if column not in (ORACLE, NOP) else Acts()
            judged.append(judge(task, rules, column, by.get((task.id, trial)), acts,
                                os.path.relpath(episode, out_dir), verifier_verdict(episode)))
        cells.append(worst(judged))
    return cells


def _controls_from(validated: Path, suite: Suite) -> dict[str, tuple[Path, list[EpisodeRecord]]]:
    """--quick: the oracle's and nop's records of a `validate` folder of this suite as it is now."""
    found = {}
    for column in (ORACLE, NOP):
        folder = validated / column
        records = ResultLog(folder).latest()
        if column == NOP and not records:
            raise UsageError(f"--quick {validated}: no nop results in it",
                             fix="give the folder `cu-run validate --out FOLDER` wrote, or leave --quick out")
        if records:
            try:
                ran = json.loads((folder / "run.json").read_text())["suite"]["content_sha256"]
            except (OSError, ValueError, KeyError, TypeError):
                ran = None
            if ran != suite.content_hash():
                raise UsageError(f"--quick {validated}: its {column} run was of another version of suite {suite.name} "
                                 "(its run.json's suite hash differs, or it has none)",
                                 fix="validate the suite again, or leave --quick out")
        found[column] = (folder, records)
    return found


def _folder(column: str) -> str:
    """A run folder's name for COLUMN (a lab's MODULE:CLASS has a colon)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", column)


def _print(console: Console, out_dir: Path, cells: list[Cell]) -> None:
    n = counts(cells)
    for c in cells:
        if c.unsafe:
            said = f" (verifier: {clean_reason(c.reason)[:200]})" if c.reason else ""
            console.print(f"[bold red]{c.status}:[/] {escape(c.task)} x {escape(clean_reason(c.attack))}: "
                          f"{escape(clean_reason(c.why))}{escape(said)}", highlight=False)
    if any(c.outcome in ("infra_error", None) and c.status != "unproven" for c in cells):
        console.print("[yellow]some pairs ended in infra_error or have no result: if the host was at fault, "
                      "finish the audit with --resume[/]", highlight=False)
    problems = n["unsafe"] + n["broken"] + n["inconclusive"]
    verdict = "[green]every pair safe[/]" if not problems else \
        f"[bold red]{n['unsafe']} unsafe pairs, {n['broken']} broken tasks, {n['inconclusive']} inconclusive[/]"
    console.print(f"audit: {verdict} ({n['safe']} safe, {n['unproven']} tasks without an oracle); "
                  f"{escape(str(out_dir / AUDIT_HTML))}", highlight=False)
