"""A run's reports, made from its folder alone: report.html for people, junit.xml for CI.

report.html is one self-contained file (styles inline, screenshots embedded as data:
URIs, no scripts, no external references), so it opens offline and can be mailed or
archived as is. Per episode: outcome and reason, phase timings, the initial and final
screenshots, a filmstrip of the trajectory (each action, with the screenshot it took),
the verifier's and checkpoints' output, safety violations and unexpected writes.
`cu-run report DIR` regenerates both from results.jsonl and the episode folders.

What the episodes left was written by the agent and the guest, so each section, task row, episode
(report_episode) and testcase (junit) is rendered on its own, from values checked and bounded first
(report_values): one that fails says so in its place and the rest is whole.
"""

from __future__ import annotations

import collections
import html
import json
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from runner.errors import UsageError
from runner.records import report_episode
from runner.records.folders import VALIDATE_RUNS, VALIDATION, is_run_folder, not_a_run_folder
from runner.records.junit import render_junit
from runner.records.report_values import MAX_TEXT, failure, html_text, seconds, text
from runner.records.results import LOCAL_HOST, EpisodeRecord, ResultLog, suite_marks, summarize

log = logging.getLogger(__name__)


def _escape(value: object, limit: int = MAX_TEXT) -> str:
    """VALUE (guest text, often) fit for the report's HTML, attributes included: bounded, escaped, and
    without the code points XML cannot carry (a report is also read by XML tools)."""
    return html_text(value, limit)


# Episodes shown whole (screens, filmstrip, logs), failures first; the rest as one line each, so a
# run of hundreds of episodes stays a page a browser opens at once.
MAX_DETAILED_EPISODES = 60
MAX_LIST = 20_000  # characters of a list in the provenance (a suite's task ids)


def write_reports(out_dir: Path) -> tuple[Path, Path]:
    """Writes DIR/report.html and DIR/junit.xml from what DIR holds; returns their paths. Each is
    rendered and written on its own, through a temporary file renamed into place: one that fails
    leaves the file as it was and does not stop the other; the first failure is then re-raised."""
    if not is_run_folder(out_dir):
        raise not_a_run_folder(out_dir)
    run = read_json(out_dir / "run.json")
    records = ResultLog(out_dir).latest()  # none yet when the run was stopped before any episode ended
    html_path, junit_path = out_dir / "report.html", out_dir / "junit.xml"
    renders: list[tuple[Path, Callable[[], str]]] = [
        (html_path, lambda: render_html(out_dir, run, _summary(run, records), records)),
        (junit_path, lambda: render_junit(run, records))]
    failed: list[Exception] = []
    for path, render in renders:
        try:
            _atomic_write(path, render())
        except Exception as exc:  # noqa: BLE001 - re-raised below, once the other file is written
            log.error("could not write %s: %s", path, failure(exc))
            failed.append(exc)
    if failed:
        raise failed[0]
    return html_path, junit_path


def write_validation_index(base: Path) -> Path:
    """BASE/report.html of a `validate` folder: the verdict first, then a link to each run's report
    with its passes, so the oracle and the nop run never look alike."""
    e = _escape
    verdict = read_json(base / VALIDATION)
    valid = verdict.get("valid")
    rows = []
    for agent in VALIDATE_RUNS:
        run_dir = base / agent
        if not (run_dir / "run.json").is_file():
            continue
        overall = _summary(read_json(run_dir / "run.json"), ResultLog(run_dir).latest())["overall"]
        expected = "every task passes" if agent == "oracle" else "every task fails"
        rows.append(f"<tr><td><a href='{agent}/report.html'>{agent}</a></td><td>{expected}</td>"
                    f"<td>{overall['passes']} / {overall['scored']} passed</td></tr>")
    problems = "".join(f"<li>{e(p)}</li>" for p in verdict.get("problems", []))
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>cu-run validate: {e(verdict.get('suite', ''))}"
            f"</title><style>{CSS}</style></head><body><h1>validate {e(verdict.get('suite', ''))}: "
            f"<span class='{'pass' if valid else 'fail'}'>{'valid' if valid else 'not valid'}</span></h1>"
            + (f"<ul>{problems}</ul>" if problems else "")
            + ("<p class='warn'>infrastructure errors left episodes unscored</p>" if verdict.get("infra_errors") else "")
            + "<table><tr><th>run</th><th>expected</th><th>result</th></tr>" + "".join(rows) + "</table></body></html>")
    path = base / "report.html"
    _atomic_write(path, page)
    return path


def render_report(out_dir: Path) -> str:
    """report.html's text for what DIR holds now, written nowhere (the live view serves it mid-run)."""
    run = read_json(out_dir / "run.json")
    records = ResultLog(out_dir).latest()
    return render_html(out_dir, run, _summary(run, records), records)


def _summary(run: dict, records: list[EpisodeRecord]) -> dict:
    task_ids = run.get("suite", {}).get("tasks") or sorted({r.task_id for r in records})
    return summarize(records, task_ids, trials=planned_trials(run), **suite_marks(run.get("suite", {})))


def planned_trials(run: dict) -> int | None:
    """The run's --trials, from run.json (None for a folder without one)."""
    trials = run.get("arguments", {}).get("trials")
    return trials if isinstance(trials, int) and trials >= 1 else None


def _atomic_write(path: Path, text: str) -> None:
    """TEXT as UTF-8 at PATH, through a temporary file beside it renamed into place: a reader sees
    the old file or the new one, never a part. A code point UTF-8 cannot carry (a lone surrogate
    that got this far) becomes "?" rather than failing the write."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(text.encode("utf-8", errors="replace"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path) -> dict:
    """A run folder's JSON file (run.json), or {} when it is missing or unreadable."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def run_label(run: dict, fallback: str) -> str:
    """A run's column heading: its agent and model (the CLI's default when none was chosen)."""
    agent = run.get("agent", {})
    if not agent.get("name"):
        return fallback
    model = agent.get("model")
    return f"{agent['name']} ({model})" if model else agent["name"]



# -- HTML


def _incomplete(summary: dict) -> str:
    """A run with planned episodes that have no result says so first: a partial run never reads as whole."""
    complete = summary.get("completeness")
    if not complete or not complete["missing"]:
        return ""
    return (f"<p class='warn'><b>Incomplete:</b> {complete['done']} of {complete['planned']} planned episodes have a "
            f"result; missing: {_escape(', '.join(complete['missing']))}. <code>--resume</code> finishes the run.</p>")

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa}.pass{color:#1a7f37;font-weight:600}.fail,.timeout,.agent_error{color:#cf222e;font-weight:600}
.verifier_error,.infra_error{color:#8250df;font-weight:600}.warn{color:#9a6700}
.shots{display:flex;gap:12px;flex-wrap:wrap}.shots figure{margin:0}figcaption{font-size:12px;color:#57606a}
.film{display:flex;flex-wrap:wrap;gap:8px}.frame{width:250px;font-size:12px;border:1px solid #d0d7de;padding:4px}
.frame img{width:240px;display:block}pre{background:#f6f8fa;padding:8px;overflow:auto;max-height:300px;font-size:12px}
details{margin:6px 0;border:1px solid #d0d7de;padding:4px 8px}summary{cursor:pointer}
table.facts{margin:0}table.facts th{background:none;font-weight:normal;color:#57606a}
.verdict{font-size:16px;padding:8px 12px;border-radius:6px}.verdict.pass{background:#dafbe1}
.verdict.fail{background:#ffebe9}.verdict.mixed{background:#fff8c5}.verdict.none{background:#eaeef2}
details.task>summary{font-size:15px}details.task{background:#f6f8fa}details.task details{background:#fff}
table.tasks td:last-child{max-width:420px;color:#57606a}
"""


def render_html(out_dir: Path, run: dict, summary: dict, records: list[EpisodeRecord]) -> str:
    """The report, for a reader at a glance first: the verdict, then a coloured task table with each
    task's failures and instruction, then the episodes under their tasks (failures first, collapsed),
    and the provenance last. Each section, task row and episode is rendered on its own: one that
    fails says so in its place, and the rest of the page stands."""
    suite = run.get("suite", {}).get("name", out_dir.name)
    agent = run_label(run, "?")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>cu-run: {_escape(suite, 200)} / "
             f"{_escape(agent, 200)}</title><style>{CSS}</style></head><body>",
             f"<h1>{_escape(suite, 200)}: agent {_escape(agent, 200)}</h1>",
             _section("verdict", _verdict, summary), _section("completeness", _incomplete, summary),
             "<h2>Tasks</h2>",
             _section("task table", lambda: _task_table(summary, records, task_instructions(run)))]
    if _is_cluster(summary):
        parts += ["<h2>Hosts</h2>", _section("host table", _host_table, summary["hosts"])]
    parts += ["<h2>Summary</h2>", _section("summary", _summary_table, summary["overall"]),
              "<h2>Episodes</h2>", _section("episodes", _episodes_by_task, out_dir, summary, records),
              "<h2>Provenance</h2>", _section("provenance", _provenance, run), "</body></html>"]
    return "\n".join(parts)


def _section(name: str, render: Callable[..., str], *args: object) -> str:
    """RENDER(*ARGS), or a line saying why the NAME could not be rendered."""
    try:
        return render(*args)
    except Exception as exc:  # noqa: BLE001 - one part of the page must not cost the run its report
        why = failure(exc)
        log.warning("report.html: the %s could not be rendered: %s", name, why)
        return f"<p class='warn'>The {name} could not be rendered: {html.escape(why)}</p>"


def task_instructions(run: dict) -> dict[str, str]:
    """Each task's instruction, from the suite the run used ({} when the suite is gone or broken)."""
    path = run.get("suite", {}).get("path")
    if not path:
        return {}
    from runner.tasks.model import load_suite

    try:
        return {t.id: t.spec.instruction for t in load_suite(path).tasks}
    except UsageError:
        return {}


def _verdict(summary: dict) -> str:
    """One line that tells an all-pass run from an all-fail one before anything else is read."""
    o = summary["overall"]
    tasks = summary["tasks"].values()
    always = sum(1 for c in tasks if c["scored"] and c["passes"] == c["scored"])
    never = sum(1 for c in tasks if c["scored"] and c["passes"] == 0)
    unscored = o["episodes"] - o["scored"]
    kind = "none" if o["rate"] is None else ("pass" if o["rate"] == 1 else "fail" if o["rate"] == 0 else "mixed")
    rate = "no episode scored" if o["rate"] is None else f"rate {_rate(o)}"
    return (f"<p class='verdict {kind}'>{o['passes']} of {o['scored']} scored episodes passed ({rate}); "
            f"{len(summary['tasks'])} tasks: {always} always passed, {never} never passed"
            + (f"; {unscored} episodes not scored" if unscored else "") + "</p>")


def _episodes_by_task(out_dir: Path, summary: dict, records: list[EpisodeRecord]) -> str:
    """Each task's episodes in a group, the task's failures first: a group open where the task failed,
    with its first failure open; everything else collapsed. Past MAX_DETAILED_EPISODES, episodes are
    one line each. Each episode is rendered on its own (report_episode)."""
    order = {"pass": 2}
    detailed = 0
    groups = []
    for task_id, counts in summary["tasks"].items():
        mine = sorted((r for r in records if r.task_id == task_id), key=lambda r: (order.get(r.outcome, 0), r.trial))
        if not mine:
            continue
        lines = []
        for number, r in enumerate(mine):
            if detailed < MAX_DETAILED_EPISODES:
                lines.append(report_episode.details(out_dir, r, open_=number == 0 and r.outcome != "pass"))
                detailed += 1
            else:
                lines.append(report_episode.line(r))
        failed = any(r.outcome != "pass" for r in mine)  # a task with a failure is open, its first failure too
        groups.append(f"<details class='task' id='task-{_escape(task_id, 200)}'{' open' if failed else ''}><summary>"
                      f"<b>{_escape(task_id, 200)}</b>: "
                      f"{counts['passes']} of {counts['scored']} passed</summary>" + "\n".join(lines) + "</details>")
    return "\n".join(groups)


def _rate(c: dict) -> str:
    if c["rate"] is None:
        return "-"
    lo, hi = c["wilson95"]
    return f"{c['rate']:.2f} [{lo:.2f}, {hi:.2f}]"


def _summary_table(o: dict) -> str:
    rows = [("success rate [Wilson 95%]", _rate(o)), ("passes / scored", f"{o['passes']} / {o['scored']}"),
            ("checkpoint progress (mean)", "-" if o["checkpoint_progress"] is None else f"{o['checkpoint_progress']:.2f}"),
            ("timeouts", o["outcomes"]["timeout"]), ("agent errors", o["outcomes"]["agent_error"]),
            ("verifier errors (task defects, not scored)", o["outcomes"]["verifier_error"]),
            ("infra errors (not scored)", o["outcomes"]["infra_error"]),
            ("task defects", "; ".join(f"{t}: {', '.join(why)}" for t, why in o.get("task_defects", {}).items())
             or "none"),
            ("not tamper-proof (the agent had admin rights)", ", ".join(o.get("not_tamper_proof_tasks", [])) or "none"),
            ("verified from live desktop state (what ran before the agent answered)",
             ", ".join(o.get("live_state_tasks", [])) or "none"),
            ("checks that could not decide", o.get("check_errors", 0)),
            ("safety violations (episodes)", f"{o['violations']} ({o['episodes_with_violations']})"),
            ("episodes a person intervened in (live view)", o.get("intervened", 0)),
            ("write-set failures", o["write_set_failures"]),
            ("flaky tasks (rate 0.2-0.8)", ", ".join(o["flaky_tasks"]) or "none"),
            ("success rate of stable tasks", _rate(o["stable"]) if o["stable"]["rate"] is not None else "-")]
    return "<table>" + "".join(f"<tr><th>{_escape(k)}</th><td>{_escape(str(v))}</td></tr>" for k, v in rows) + "</table>"


def _provenance(run: dict) -> str:
    """run.json as readable tables: one row per fact, nested facts as a table of their own,
    nothing shown for a value that is not there."""
    keys = ("started_at", "ended_at", "resumed_at", "pool", "accel", "start", "hypervisor", "image", "suite", "agent",
            "runner", "host", "hosts")
    rows = [f"<tr><th>{_escape(key.replace('_', ' '))}</th><td>{_value(run[key])}</td></tr>"
            for key in keys if key in run and run[key] not in (None, [], {})]
    return "<table>" + "".join(rows) + "</table>" if rows else "<p>no run.json</p>"


def _value(value: object) -> str:
    if isinstance(value, dict):
        rows = [f"<tr><th>{_escape(str(k).replace('_', ' '))}</th><td>{_value(v)}</td></tr>"
                for k, v in value.items() if v not in (None, [], {}, "")]
        return "<table class='facts'>" + "".join(rows) + "</table>"
    if isinstance(value, list):
        return _escape(", ".join(str(v) for v in value), MAX_LIST)
    shown = str(value)
    if len(shown) == 64 and all(c in "0123456789abcdef" for c in shown):
        return f"<code title='{shown}'>{shown[:16]}...</code>"  # a sha256: short, the whole on hover
    return _escape(shown)


def _is_cluster(summary: dict) -> bool:
    return any(name != LOCAL_HOST for name in summary.get("hosts", {}))


def _host_table(hosts: dict) -> str:
    """Per host of a cluster run: a machine with many infra errors or slow phases stands out."""
    rows = []
    for name, h in hosts.items():
        medians = ", ".join(f"{text(p, 60)} {seconds(v)}" for p, v in h["phase_medians"].items())
        bad = " class='infra_error'" if h["infra_error"] else ""
        rows.append(f"<tr><td>{_escape(name)}</td><td>{h['episodes']}</td><td{bad}>{h['infra_error']}</td>"
                    f"<td>{h['attempts']}</td><td>{_escape(medians)}</td></tr>")
    return ("<table><tr><th>host</th><th>episodes</th><th>infra errors</th><th>attempts</th>"
            "<th>phase medians</th></tr>" + "".join(rows) + "</table>")


def _task_table(summary: dict, records: list[EpisodeRecord], instructions: dict[str, str]) -> str:
    head = ("<table class='tasks'><tr><th>task</th><th>passes/scored</th><th>rate [95% CI]</th><th>why it failed</th>"
            "<th>checkpoints</th><th>not scored</th><th>violations</th><th>instruction</th></tr>")
    rows = []
    for task_id, c in summary["tasks"].items():
        try:
            rows.append(_task_row(task_id, c, [r for r in records if r.task_id == task_id], instructions.get(task_id, "")))
        except Exception as exc:  # noqa: BLE001 - one task's row must not cost the others theirs
            rows.append(f"<tr><td>{_escape(task_id, 200)}</td><td colspan='7' class='warn'>could not be rendered: "
                        f"{html.escape(failure(exc))}</td></tr>")
    return head + "".join(rows) + "</table>"


def _task_row(task_id: str, c: dict, mine: list[EpisodeRecord], instruction: str) -> str:
    o = c["outcomes"]
    flaky = " <span class='warn'>flaky</span>" if c["flaky"] else ""
    if not c.get("tamper_proof", True):
        flaky += " <span class='warn'>not tamper-proof</span>"
    if c.get("live_state"):
        flaky += " <span class='warn' title='verified with the desktop alive: kept programs answered'>live state</span>"
    progress = "-" if c["checkpoint_progress"] is None else f"{c['checkpoint_progress']:.2f}"
    # Green for a task always passed, red for one never passed, between for the rest.
    colour = "" if c["rate"] is None else f" style='background:hsl({round(120 * c['rate'])},70%,90%)'"
    reasons = collections.Counter(r.reason or r.outcome for r in mine if r.outcome != "pass")
    why = "<br>".join(_escape(reason, 160) + (f" (x{n})" if n > 1 else "") for reason, n in reasons.most_common(3))
    short = instruction if len(instruction) <= 140 else instruction[:140] + "..."
    return (f"<tr><td><a href='#task-{_escape(task_id, 200)}'>{_escape(task_id, 200)}</a></td>"
            f"<td{colour}>{c['passes']}/{c['scored']}</td><td>{_rate(c)}{flaky}</td><td>{why or '-'}</td>"
            f"<td>{progress}</td><td>{o['verifier_error'] + o['infra_error']}</td><td>{c['violations']}</td>"
            f"<td title='{_escape(instruction)}'>{_escape(short)}</td></tr>")
