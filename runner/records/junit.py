"""junit.xml: a testcase per task and trial, for CI (fail, timeout and agent error as failures;
verifier and infra errors as errors).

Guest text reaches every field (a reason, a violation's detail, a checkpoint's name), so each
goes through report_values.text: bounded, and without the code points XML 1.0 cannot carry. Each
testcase is built on its own: one that fails becomes a testcase that says so, with its outcome
kept, and the others are whole.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET

from runner.records.report_values import duration, failure, text
from runner.records.results import EpisodeRecord

log = logging.getLogger(__name__)

FAILURES = {"fail", "timeout", "agent_error"}
ERRORS = {"verifier_error", "infra_error"}
MAX_NAME = 200
MAX_MESSAGE = 1000  # characters of a failure's message
MAX_NOTE = 1000  # characters of one line of a testcase's system-out
MAX_NOTES = 100  # violations and checkpoints listed per testcase


def render_junit(run: dict, records: list[EpisodeRecord]) -> str:
    suite_name = text(_suite_name(run), MAX_NAME)
    cases = [_testcase(suite_name, r) for r in records]
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", {
        "name": suite_name, "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if c.find("failure") is not None)),
        "errors": str(sum(1 for c in cases if c.find("error") is not None)),
        "time": f"{sum(_seconds(r) for r in records):.1f}"})
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite_name(run: dict) -> object:
    suite = run.get("suite")
    return suite.get("name", "cu-run") if isinstance(suite, dict) else "cu-run"


def _seconds(r: EpisodeRecord) -> float:
    return duration(r.duration_s) or 0.0


def _testcase(suite_name: str, r: EpisodeRecord) -> ET.Element:
    try:
        return _built(suite_name, r)
    except Exception as exc:  # noqa: BLE001 - one episode's leavings must not cost CI the run's results
        why = failure(exc)
        log.warning("junit.xml: %s #%s could not be rendered: %s", text(r.task_id, MAX_NAME), text(r.trial, 20), why)
        case = _case(suite_name, r)
        _verdict(case, r, f"could not be rendered: {why}")
        return case


def _case(suite_name: str, r: EpisodeRecord) -> ET.Element:
    task = text(r.task_id, MAX_NAME)
    return ET.Element("testcase", {"classname": f"{suite_name}.{task}", "name": f"{task} trial {text(r.trial, 20)}",
                                   "time": f"{_seconds(r):.1f}"})


def _verdict(case: ET.Element, r: EpisodeRecord, message: str) -> None:
    """A failure or an error element, as the outcome asks (none for a pass); an unknown outcome is an error."""
    outcome = text(r.outcome, 40)
    kind = None if outcome == "pass" else "failure" if outcome in FAILURES else "error"
    if kind is not None:
        ET.SubElement(case, kind, {"type": outcome, "message": text(message, MAX_MESSAGE)})
    elif message:
        ET.SubElement(case, "system-out").text = text(message, MAX_MESSAGE)


def _built(suite_name: str, r: EpisodeRecord) -> ET.Element:
    case = _case(suite_name, r)
    _verdict(case, r, "" if r.outcome == "pass" else r.reason or r.outcome)
    notes = [f"violation {text(v.get('rule'), 200)}: {text(v.get('detail'), MAX_NOTE)}"
             if isinstance(v, dict) else f"violation: {text(v, MAX_NOTE)}" for v in r.violations[:MAX_NOTES]]
    notes += [f"checkpoint {text(k, 200)}: {'pass' if ok is True else 'fail'}"
              for k, ok in list(r.checkpoints.items())[:MAX_NOTES]]
    if len(r.violations) > MAX_NOTES or len(r.checkpoints) > MAX_NOTES:
        notes.append(f"(the first {MAX_NOTES} violations and checkpoints are listed)")
    if duration(r.duration_s) is None:
        notes.append(f"its duration ({text(r.duration_s, 40)}) is not a number of seconds: time 0")
    if notes:
        ET.SubElement(case, "system-out").text = "\n".join(notes)
    return case
