"""A run's reports, made from its folder alone: report.html for people, junit.xml for CI.

report.html is one self-contained file (styles inline, screenshots embedded as data:
URIs, no scripts, no external references), so it opens offline and can be mailed or
archived as is. Per episode: outcome and reason, phase timings, the initial and final
screenshots, a filmstrip of the trajectory (each action, with the screenshot it took),
the verifier's and checkpoints' output, safety violations and unexpected writes.
`cu-run report DIR` regenerates both from results.jsonl and the episode folders.
"""

from __future__ import annotations

import base64
import collections
import html
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from PIL import Image as PILImage
from PIL import ImageDraw

from runner.errors import UsageError
from runner.records.folders import VALIDATE_RUNS, VALIDATION, is_run_folder, not_a_run_folder
from runner.records.recording import RECORDING
from runner.records.results import LOCAL_HOST, EpisodeRecord, ResultLog, suite_marks, summarize
from runner.scoring.safety import read_trajectory
from runner.scoring.verdict import xml_text


def _escape(text: str) -> str:
    """TEXT (guest text, often) fit for the report's HTML: escaped, and without the code points
    XML cannot carry (a report is also read by XML tools)."""
    return html.escape(xml_text(text))

THUMB_WIDTH = 480
FILM_WIDTH = 240
MAX_FILM_FRAMES = 80  # per episode: bounds the report's size on long trajectories
MAX_LOG_CHARS = 8000
# Episodes shown whole (screens, filmstrip, logs), failures first; the rest as one line each, so a
# run of hundreds of episodes stays a page a browser opens at once.
MAX_DETAILED_EPISODES = 60
FAILURES = {"fail", "timeout", "agent_error"}
ERRORS = {"verifier_error", "infra_error"}


def write_reports(out_dir: Path) -> tuple[Path, Path]:
    """Writes DIR/report.html and DIR/junit.xml from what DIR holds; returns their paths."""
    if not is_run_folder(out_dir):
        raise not_a_run_folder(out_dir)
    run = read_json(out_dir / "run.json")
    records = ResultLog(out_dir).latest()  # none yet when the run was stopped before any episode ended
    html_path, junit_path = out_dir / "report.html", out_dir / "junit.xml"
    _atomic_write(html_path, render_html(out_dir, run, _summary(run, records), records))
    _atomic_write(junit_path, render_junit(run, records))
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
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def read_json(path: Path) -> dict:
    """A run folder's JSON file (run.json), or {} when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


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
    and the provenance last."""
    e = _escape
    overall = summary["overall"]
    suite = run.get("suite", {}).get("name", out_dir.name)
    agent = run_label(run, "?")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>cu-run: {e(suite)} / {e(agent)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>{e(suite)}: agent {e(agent)}</h1>", _verdict(summary), _incomplete(summary),
             "<h2>Tasks</h2>", _task_table(summary, records, task_instructions(run))]
    if _is_cluster(summary):
        parts += ["<h2>Hosts</h2>", _host_table(summary["hosts"])]
    parts += ["<h2>Summary</h2>", _summary_table(overall), "<h2>Episodes</h2>", _episodes_by_task(out_dir, summary, records),
              "<h2>Provenance</h2>", _provenance(run), "</body></html>"]
    return "\n".join(parts)


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
    one line each."""
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
                lines.append(_episode(out_dir, r, open_=number == 0 and r.outcome != "pass"))
                detailed += 1
            else:
                lines.append(_episode_line(r))
        failed = any(r.outcome != "pass" for r in mine)  # a task with a failure is open, its first failure too
        groups.append(f"<details class='task' id='task-{_escape(task_id)}'{' open' if failed else ''}><summary>"
                      f"<b>{_escape(task_id)}</b>: "
                      f"{counts['passes']} of {counts['scored']} passed</summary>" + "\n".join(lines) + "</details>")
    return "\n".join(groups)


def _episode_line(r: EpisodeRecord) -> str:
    e = _escape
    return (f"<p id='{e(r.task_id)}-{r.trial}'>#{r.trial}: <span class='{e(r.outcome)}'>{e(r.outcome)}</span> "
            f"{e(r.reason)} ({r.duration_s:.0f} s); its files: <code>{e(r.task_id)}/{r.trial}/</code></p>")


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
        return _escape(", ".join(str(v) for v in value))
    text = str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return f"<code title='{text}'>{text[:16]}...</code>"  # a sha256: short, the whole on hover
    return _escape(text)


def _is_cluster(summary: dict) -> bool:
    return any(name != LOCAL_HOST for name in summary.get("hosts", {}))


def _host_table(hosts: dict) -> str:
    """Per host of a cluster run: a machine with many infra errors or slow phases stands out."""
    rows = []
    for name, h in hosts.items():
        medians = ", ".join(f"{p} {v:.1f} s" for p, v in h["phase_medians"].items())
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
        o = c["outcomes"]
        flaky = " <span class='warn'>flaky</span>" if c["flaky"] else ""
        if not c.get("tamper_proof", True):
            flaky += " <span class='warn'>not tamper-proof</span>"
        if c.get("live_state"):
            flaky += " <span class='warn' title='verified with the desktop alive: kept programs answered'>live state</span>"
        progress = "-" if c["checkpoint_progress"] is None else f"{c['checkpoint_progress']:.2f}"
        # Green for a task always passed, red for one never passed, between for the rest.
        colour = "" if c["rate"] is None else f" style='background:hsl({round(120 * c['rate'])},70%,90%)'"
        reasons = collections.Counter(r.reason or r.outcome for r in records if r.task_id == task_id and r.outcome != "pass")
        why = "<br>".join(f"{_escape(reason[:160])}" + (f" (x{n})" if n > 1 else "") for reason, n in reasons.most_common(3))
        instruction = instructions.get(task_id, "")
        short = instruction if len(instruction) <= 140 else instruction[:140] + "..."
        rows.append(f"<tr><td><a href='#task-{_escape(task_id)}'>{_escape(task_id)}</a></td>"
                    f"<td{colour}>{c['passes']}/{c['scored']}</td><td>{_rate(c)}{flaky}</td><td>{why or '-'}</td>"
                    f"<td>{progress}</td><td>{o['verifier_error'] + o['infra_error']}</td><td>{c['violations']}</td>"
                    f"<td title='{_escape(instruction)}'>{_escape(short)}</td></tr>")
    return head + "".join(rows) + "</table>"


def _episode(out_dir: Path, r: EpisodeRecord, open_: bool = False) -> str:
    e = _escape
    ep = out_dir / r.task_id / str(r.trial)
    parts = [f"<details id='{e(r.task_id)}-{r.trial}'{' open' if open_ else ''}><summary>"
             f"<b>{e(r.task_id)}</b> #{r.trial}: <span class='{e(r.outcome)}'>{e(r.outcome)}</span> "
             f"{e(r.reason)} ({r.duration_s:.0f} s)"
             f"{' <span class=warn>intervened: a person used the mouse or keyboard</span>' if r.intervened else ''}"
             "</summary>"]
    if r.phases:
        parts.append("<p>phases: " + e(", ".join(f"{k} {v:.1f} s" for k, v in r.phases.items())) + "</p>")
    shots = [(name, ep / f"{name}.png") for name in ("initial", "final")]
    figures = [f"<figure>{_img(path, THUMB_WIDTH)}<figcaption>{name}</figcaption></figure>"
               for name, path in shots if path.is_file()]
    if figures:
        parts.append("<div class='shots'>" + "".join(figures) + "</div>")
    if r.violations:
        parts.append("<h3>Safety violations</h3><ul>" + "".join(
            f"<li><b>{e(v.get('rule', ''))}</b> (step {e(str(v.get('step')))}): {e(v.get('detail', ''))}</li>"
            for v in r.violations) + "</ul>")
    if r.changed:
        parts.append("<h3>Changed outside the allowed paths</h3><ul>" +
                     "".join(f"<li>{e(c)}</li>" for c in r.changed) + "</ul>")
    if r.checkpoints:
        parts.append("<h3>Checkpoints</h3><ul>" + "".join(
            f"<li>{e(name)}: <span class='{'pass' if ok else 'fail'}'>{'pass' if ok else 'fail'}</span></li>"
            for name, ok in r.checkpoints.items()) + "</ul>")
    parts.append(_recording_link(ep))
    parts.append(_filmstrip(ep))
    for log in ("verify.log", "agent.log", "setup.log"):
        if (ep / log).is_file():
            text = (ep / log).read_text(errors="replace")[-MAX_LOG_CHARS:]
            parts.append(f"<h3>{e(log)}</h3><pre>{e(text)}</pre>")
    parts.append("</details>")
    return "\n".join(parts)


def _filmstrip(ep: Path) -> str:
    entries = read_trajectory(ep / "trajectory.jsonl")
    if not entries:
        return ""
    frames, shown, last_shot = [], 0, None
    for entry in entries:
        shot = entry.get("screenshot")
        image = ""
        if shot and (ep / shot).is_file():
            last_shot = ep / shot
            if shown < MAX_FILM_FRAMES:
                image, shown = _img(last_shot, FILM_WIDTH), shown + 1
        elif (marks := _marks(entry)) and last_shot is not None and shown < MAX_FILM_FRAMES:
            # Where a click, drag or scroll went, drawn on the screen as the agent last saw it.
            image, shown = _img(last_shot, FILM_WIDTH, marks), shown + 1
        args = json.dumps(entry.get("arguments", {}), ensure_ascii=False)[:200]
        label = "human" if entry.get("intervention") else f"{entry.get('step')}. {entry.get('tool', '')}"
        frames.append(f"<div class='frame'>{image}<b>{_escape(str(label))}"
                      f"</b><br>{_escape(args)}<br><i>{_escape(str(entry.get('result', ''))[:120])}</i> "
                      f"({entry.get('duration_s', 0):.2f} s)</div>")
    return f"<h3>Trajectory ({len(entries)} steps)</h3><div class='film'>" + "".join(frames) + "</div>"


def _recording_link(ep: Path) -> str:
    """A link to the episode's screen recording (run --record), relative to the report beside it."""
    if not (ep / RECORDING).is_file():
        return ""
    href = f"{ep.parent.name}/{ep.name}/{RECORDING}"
    return f"<p><a href='{_escape(href)}'>screen recording</a> ({(ep / RECORDING).stat().st_size / 2**20:.1f} MiB)</p>"


def _marks(entry: dict) -> list[tuple[int, ...]]:
    """The points (x, y) or the line (x1, y1, x2, y2) a pointer step acted on, in screen pixels."""
    args = entry.get("arguments") or {}
    try:
        if entry.get("action") == "drag":
            return [(int(args["x1"]), int(args["y1"]), int(args["x2"]), int(args["y2"]))]
        if entry.get("action") in ("click", "scroll", "move"):
            return [(int(args["x"]), int(args["y"]))]
    except (KeyError, TypeError, ValueError):
        pass
    return []


def _img(path: Path, width: int, marks: tuple[tuple[int, ...], ...] | list[tuple[int, ...]] = ()) -> str:
    """An <img> with the picture inline: a JPEG thumbnail WIDTH pixels wide, MARKS drawn on it
    (a ring at each point, a line with a ring at its end for each drag)."""
    try:
        image = PILImage.open(path).convert("RGB")
        if marks:
            draw = ImageDraw.Draw(image)
            radius = max(6, image.width // 80)
            for mark in marks:
                if len(mark) == 4:
                    draw.line(mark, fill=(255, 0, 0), width=max(2, radius // 3))
                x, y = mark[-2], mark[-1]
                draw.ellipse((x - radius, y - radius, x + radius, y + radius), outline=(255, 0, 0), width=max(2, radius // 3))
        image.thumbnail((width, width * 4))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=70)
    except OSError:
        return f"<p>(unreadable {_escape(path.name)})</p>"
    data = base64.b64encode(buffer.getvalue()).decode()
    return f"<img alt='{_escape(path.name)}' width='{image.width}' src='data:image/jpeg;base64,{data}'>"


# -- JUnit

def render_junit(run: dict, records: list[EpisodeRecord]) -> str:
    suite_name = run.get("suite", {}).get("name", "cu-run")
    failures = sum(1 for r in records if r.outcome in FAILURES)
    errors = sum(1 for r in records if r.outcome in ERRORS)
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", {
        "name": suite_name, "tests": str(len(records)), "failures": str(failures), "errors": str(errors),
        "time": f"{sum(r.duration_s for r in records):.1f}"})
    for r in records:
        # Guest text reaches every field below (a reason, a violation's detail, a checkpoint's name):
        # each goes through xml_text, so no code point can make the file unparseable.
        case = ET.SubElement(suite, "testcase", {"classname": xml_text(f"{suite_name}.{r.task_id}"),
                                                 "name": xml_text(f"{r.task_id} trial {r.trial}"),
                                                 "time": f"{r.duration_s:.1f}"})
        if r.outcome in FAILURES:
            ET.SubElement(case, "failure", {"type": r.outcome, "message": xml_text(r.reason or r.outcome)})
        elif r.outcome in ERRORS:
            ET.SubElement(case, "error", {"type": r.outcome, "message": xml_text(r.reason or r.outcome)})
        notes = [f"violation {v.get('rule')}: {v.get('detail')}" for v in r.violations]
        notes += [f"checkpoint {k}: {'pass' if ok else 'fail'}" for k, ok in r.checkpoints.items()]
        if notes:
            ET.SubElement(case, "system-out").text = xml_text("\n".join(notes))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
