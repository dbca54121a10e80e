"""An audit's reports: audit.json (every cell), junit.xml (a testcase per task and attack, so CI can
gate on it) and report.html (the matrix, the unsafe cells first with what the verifier accepted
and a link to each episode's folder).

A cell's reason is the verifier's and an attack's output the guest's: every text goes through
report_values (bounded, fit for XML, escaped for HTML).
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import quote

from runner.audit.judge import NOP, ORACLE, Cell
from runner.records.report_values import html_text, text

AUDIT_JSON, AUDIT_HTML, AUDIT_JUNIT = "audit.json", "report.html", "junit.xml"
MAX_REASON = 1000
MARK = {"safe": "safe", "ok": "passes", "unsafe": "UNSAFE", "broken": "BROKEN", "inconclusive": "INCONCLUSIVE",
        "unproven": "no oracle", "untested": "nothing to try"}


def write_audit_reports(out_dir: Path, audit: dict, cells: list[Cell]) -> None:
    """AUDIT (suite, attacks, counts) and CELLS to OUT_DIR's audit.json, junit.xml and report.html."""
    data = {**audit, "cells": [c.as_dict() for c in cells]}
    (out_dir / AUDIT_JSON).write_text(json.dumps(data, indent=2) + "\n")
    (out_dir / AUDIT_JUNIT).write_text(render_junit(audit, cells))
    (out_dir / AUDIT_HTML).write_text(render_html(audit, cells))


def counts(cells: list[Cell]) -> dict[str, int]:
    return {status: sum(1 for c in cells if c.status == status) for status in MARK}


def render_junit(audit: dict, cells: list[Cell]) -> str:
    """One testcase per (task, attack): an unsafe or broken cell is a failure naming why."""
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", {
        "name": text(f"cu-run audit {audit.get('suite', '')}", 200), "tests": str(len(cells)),
        "failures": str(sum(1 for c in cells if c.unsafe)), "errors": "0"})
    for c in cells:
        case = ET.SubElement(suite, "testcase", {"classname": text(c.task, 200), "name": text(c.attack, 200)})
        if c.unsafe:
            failure = ET.SubElement(case, "failure", {"message": text(c.why, MAX_REASON), "type": c.status})
            failure.text = text(f"outcome: {c.outcome}\nverifier: {c.reason}\nepisode: {c.episode}", 4 * MAX_REASON)
        else:
            out = ET.SubElement(case, "system-out")
            out.text = text(f"outcome: {c.outcome}; verifier: {c.reason}", MAX_REASON)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_html(audit: dict, cells: list[Cell]) -> str:
    attacks = [a["name"] for a in audit.get("attacks", [])]  # the cells' names for them
    columns = [c for c in (ORACLE, NOP) if any(cell.attack == c for cell in cells)] + attacks
    tasks = sorted({c.task for c in cells})
    by = {(c.task, c.attack): c for c in cells}
    bad = sorted((c for c in cells if c.unsafe), key=lambda c: (c.status != "unsafe", c.task, c.attack))
    n = counts(cells)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>cu-run audit: {html_text(audit.get('suite', ''), 200)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}"
        ".unsafe,.broken,.inconclusive{background:#f8d0d0}.unproven,.untested{background:#f0f0c8}"
        ".safe,.ok{background:#d8f0d8}.why{font-size:90%}</style></head><body>",
        f"<h1>cu-run audit: {html_text(audit.get('suite', ''), 200)}</h1>",
        f"<p>{n['unsafe']} unsafe pairs, {n['broken']} tasks whose oracle did not pass, {n['inconclusive']} pairs "
        f"whose attack broke, {n['safe']} safe pairs, {n['untested']} pairs whose attack found nothing to try, "
        f"{n['unproven']} tasks without an oracle "
        f"({len(tasks)} tasks, {len(attacks)} attacks). An unsafe pair is a task an agent can be scored a pass on "
        "without doing it, or whose failure drops out of the rate, or where a violation went unrecorded.</p>",
    ]
    if bad:
        parts.append("<h2>Unsafe first</h2><table><tr><th>task</th><th>attack</th><th>outcome</th><th>why</th>"
                     "<th>the verifier said</th><th>episode</th></tr>")
        for c in bad:
            parts.append(f"<tr class='{c.status}'><td>{html_text(c.task, 200)}</td><td>{html_text(c.attack, 200)}</td>"
                         f"<td>{html_text(c.outcome, 40)}</td><td>{html_text(c.why, MAX_REASON)}</td>"
                         f"<td class='why'>{html_text(c.reason, MAX_REASON)}</td><td>{_link(c)}</td></tr>")
        parts.append("</table>")
    parts.append("<h2>Every task against every attack</h2><table><tr><th>task</th>"
                 + "".join(f"<th>{html_text(a, 200)}</th>" for a in columns) + "</tr>")
    for task in tasks:
        row = [f"<td>{html_text(task, 200)}</td>"]
        for attack in columns:
            found = by.get((task, attack))
            if found is None:
                row.append("<td></td>")
                continue
            c = found
            row.append(f"<td class='{c.status}' title='{html_text(c.why or c.reason, MAX_REASON)}'>"
                       f"{MARK[c.status]}<br><span class='why'>{html_text(c.outcome, 40)}: "
                       f"{html_text(c.reason, 300)}</span><br>{_link(c)}</td>")
        parts.append("<tr>" + "".join(row) + "</tr>")
    parts.append("</table><h2>The attacks</h2><ul>")
    for a in audit.get("attacks", []):
        parts.append(f"<li><b>{html_text(a['name'], 200)}</b> ({html_text(a['class'], 200)}): "
                     f"{html_text(a['tries'], 500)}</li>")
    parts.append("</ul></body></html>\n")
    return "".join(parts)


def _link(c: Cell) -> str:
    if not c.episode:
        return ""
    return f"<a href='{html.escape(quote(c.episode))}/'>artifacts</a>"
