"""`cu-run audit`: the controls (oracle and nop) and every attack of the battery over a suite, as
one pool's runs (runner.runs.run.run_planned: warm starts, the pool, a cluster), each run's folder
written as `cu-run run` writes it, under OUT/runs/; then every (task, attack) judged
(runner.audit.judge) and the reports written (runner.audit.report).

With --quick, the controls are read from a `validate` folder instead of run again.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.audit.attacks import describe
from runner.audit.judge import NOP, ORACLE, Acts, Cell, judge, read_acts
from runner.audit.report import AUDIT_HTML, AUDIT_JSON, counts, write_audit_reports
from runner.config import Settings, private_dir
from runner.errors import ExitCode, UsageError
from runner.records.results import EpisodeRecord, ResultLog
from runner.runs.local_pool import open_local_pool
from runner.runs.pool import PoolOpener
from runner.runs.request import RunRequest
from runner.runs.run import run_planned
from runner.runs.run_plan import RunPlan, plan_run
from runner.tasks.model import Task

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
    planned, and so checked, before any VM starts."""
    suite_name = Path(request.work.suite).name
    out_dir = (request.results.out or Path("runs") / f"audit-{suite_name}-{datetime.now(UTC):%Y%m%dT%H%M%S}").resolve()
    if (out_dir / AUDIT_JSON).exists():
        raise UsageError(f"{out_dir} already holds an audit", fix="choose another --out")
    controls = _controls_from(quick) if quick is not None else None
    columns = ([] if controls is not None else [(ORACLE, "oracle"), (NOP, "nop")]) \
        + [(describe(agent)["name"], agent) for agent in attacks]
    planned: list[tuple[str, RunPlan, RunRequest]] = []
    for column, agent in columns:
        sub = request.with_options(agent=agent, out=out_dir / RUNS / _folder(column), fail_under=None, resume=False)
        plan = plan_run(settings, sub)
        if column == ORACLE:
            with_oracle = tuple(t.id for t in plan.tasks if t.script("oracle") is not None)
            if not with_oracle:
                continue
            if len(with_oracle) < len(plan.tasks):
                sub = sub.with_options(tasks=with_oracle)
                plan = plan_run(settings, sub)
        planned.append((column, plan, sub))
    private_dir(out_dir)
    console.print(f"audit {out_dir}: {len(planned[0][1].tasks) if planned else 0} tasks against "
                  f"{len(attacks)} attacks{'' if controls else ' and the oracle and nop controls'}", highlight=False)
    run_planned(settings, [(plan, sub) for _column, plan, sub in planned], console, open_pool,
                live_title=f"audit {suite_name}", live_dir=out_dir)
    tasks = planned[-1][1].tasks
    rules = planned[-1][1].suite.safety
    cells: list[Cell] = []
    for column, plan, sub in planned:
        folder = sub.results.out
        assert folder is not None
        cells += _judged(out_dir, folder, column, plan.tasks, rules, sub.work.trials, ResultLog(folder).latest())
    if controls is not None:
        for column, (folder, records) in controls.items():
            chosen = tasks if column == NOP else tuple(t for t in tasks if t.script("oracle") is not None)
            cells += _judged(out_dir, folder, column, chosen, rules, 1, records)
    cells.sort(key=lambda c: (c.task, c.attack))
    audit = {"suite": suite_name, "suite_folder": str(planned[-1][1].suite.folder),
             "attacks": [describe(a) for a in attacks], "quick": str(quick) if quick else None,
             "ended_at": datetime.now(UTC).isoformat(), "counts": counts(cells)}
    write_audit_reports(out_dir, audit, cells)
    _print(console, out_dir, cells)
    code = ExitCode.GATE if any(c.unsafe for c in cells) else ExitCode.OK
    return AuditResult(out_dir, cells, int(code))


def _judged(out_dir: Path, folder: Path, column: str, tasks: tuple[Task, ...], suite_rules: tuple, trials: int,
            records: list[EpisodeRecord]) -> list[Cell]:
    """A cell per task of COLUMN's run in FOLDER: each trial judged, the first unsafe one kept."""
    by = {(r.task_id, r.trial): r for r in records}
    cells = []
    for task in tasks:
        rules = tuple(suite_rules) + task.spec.safety
        judged = []
        for trial in range(1, trials + 1):
            episode = folder / task.id / str(trial)
            acts = read_acts(episode / "agent.log") if column not in (ORACLE, NOP) else Acts()
            judged.append(judge(task, rules, column, by.get((task.id, trial)), acts,
                                os.path.relpath(episode, out_dir)))
        cells.append(next((c for c in judged if c.unsafe), judged[-1]))
    return cells


def _controls_from(validated: Path) -> dict[str, tuple[Path, list[EpisodeRecord]]]:
    """--quick: the oracle's and nop's records of a `validate` folder."""
    found = {}
    for column in (ORACLE, NOP):
        folder = validated / column
        records = ResultLog(folder).latest()
        if column == NOP and not records:
            raise UsageError(f"--quick {validated}: no nop results in it",
                             fix="give the folder `cu-run validate --out FOLDER` wrote, or leave --quick out")
        found[column] = (folder, records)
    return found


def _folder(column: str) -> str:
    """A run folder's name for COLUMN (a lab's MODULE:CLASS has a colon)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", column)


def _print(console: Console, out_dir: Path, cells: list[Cell]) -> None:
    n = counts(cells)
    for c in cells:
        if c.unsafe:
            console.print(f"[bold red]{c.status}:[/] {escape(c.task)} x {escape(c.attack)}: {escape(c.why)}"
                          f"{' (verifier: ' + escape(c.reason[:200]) + ')' if c.reason else ''}", highlight=False)
    verdict = "[green]every pair safe[/]" if not n["unsafe"] and not n["broken"] else \
        f"[bold red]{n['unsafe']} unsafe pairs, {n['broken']} broken tasks[/]"
    console.print(f"audit: {verdict} ({n['safe']} safe); {escape(str(out_dir / AUDIT_HTML))}", highlight=False)
