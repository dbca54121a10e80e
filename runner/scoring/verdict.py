"""The verifier contract, and how a verdict is read so that agent data cannot forge one.

Verifiers often print agent-controlled text: a file's content or a name from a listing in
their FAIL reason. So a verdict comes, first of all, from a channel of its own:

- **The verdict helper** (`verdict pass` / `verdict fail REASON` in the script, or `Verdict
  pass` / `Verdict fail REASON` in PowerShell). It records the verdict in a file of the
  admin's staging folder, which only the admin can write, and ends the script. The runner
  reads that file back after the script, behind a random boundary no process in the guest
  knows. Stdout is then only the log. A fail, once recorded, stands: a later pass cannot
  overturn it.
- **Plain stdout** (the older contract, kept for existing tasks; `tasks lint` warns): the last
  non-empty line is PASS, or FAIL and a reason. Lines are split on "\\n" only, so a Unicode
  line separator inside agent text (U+2028 and the like) stays inside its line. A PASS last
  with a verdict line before it (``FAIL holds: x`` then ``PASS``) is how agent text with a
  newline in a FAIL reason looks, so it is no verdict at all: a verifier error, which the
  runner then judges against the untouched state (runner.runs.scheduler).

Anything else is a verifier error, never the agent's pass or fail: no output, a traceback last,
PASS followed by more output, a pass with a non-zero exit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

MAX_REASON = 500  # characters of a reason kept: it may be agent data of any size
# What a reason shown to people must not hold: control characters and every line or
# paragraph separator Unicode knows, which would break the line it is shown on.
# Code points XML 1.0 cannot carry (C0 controls but tab, LF and CR; lone surrogates; U+FFFE and
# U+FFFF), and the noncharacters (U+FDD0-U+FDEF and the last two of every plane), which some
# parsers refuse too: a junit.xml holding one does not parse, and CI gets a parse error instead
# of the results.
_NONCHARACTERS = "\ufdd0-\ufdef\ufffe\uffff" + "".join(
    chr(plane * 0x10000 + 0xFFFE) + chr(plane * 0x10000 + 0xFFFF) for plane in range(1, 17))
_XML_ILLEGAL = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff{_NONCHARACTERS}]")
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u0085\u200b-\u200f\u202a-\u202e\u2066-\u2069"
                          f"\ud800-\udfff{_NONCHARACTERS}]")


def xml_text(text: str) -> str:
    """TEXT with every code point XML 1.0 cannot carry, noncharacters included, replaced by U+FFFD:
    for guest text on its way into XML, HTML or a terminal."""
    return _XML_ILLEGAL.sub("\ufffd", text)


@dataclass(frozen=True)
class Verdict:
    kind: Literal["pass", "fail", "error"]
    reason: str
    # Where the verdict came from; "exit": a host-side verifier's exit code (runner.scoring.disk_verifier).
    channel: Literal["helper", "stdout", "exit", "none"] = "none"


def parse_verdict(stdout: str, exit_code: int, helper: str | None = None) -> Verdict:
    """The verdict of a script that exited EXIT_CODE. HELPER: what the verdict helper recorded
    ("pass", or "fail" and a line break and the reason), or None when it recorded nothing."""
    if helper is not None:
        return _from_helper(helper, exit_code)
    return _from_stdout(stdout, exit_code)


def _from_helper(recorded: str, exit_code: int) -> Verdict:
    kind, _, reason = recorded.partition("\n")
    if kind == "pass":
        if exit_code != 0:
            return Verdict("error", f"the verifier recorded pass but exited {exit_code}", "helper")
        return Verdict("pass", "", "helper")
    if kind == "fail":
        return Verdict("fail", clean_reason(reason) or "no reason given", "helper")
    return Verdict("error", f"the verdict helper's record is not a verdict: {clean_reason(recorded)!r}", "helper")


def _from_stdout(stdout: str, exit_code: int) -> Verdict:
    lines = [line.strip(" \t\r") for line in stdout.split("\n")]
    lines = [line for line in lines if line]
    if not lines:
        return Verdict("error", f"the verifier printed nothing (exit {exit_code})")
    last = lines[-1]
    if last == "PASS":
        if exit_code != 0:
            return Verdict("error", f"the verifier printed PASS but exited {exit_code}", "stdout")
        earlier = next((line for line in lines[:-1] if _is_verdict_line(line)), None)
        if earlier is not None:
            return Verdict("error", "the verifier printed PASS after another verdict line "
                           f"({clean_reason(earlier)[:80]!r}): text in a FAIL reason can forge a PASS; "
                           "use the verdict helper (verdict pass / verdict fail REASON)", "stdout")
        return Verdict("pass", "", "stdout")
    if _is_fail_line(last):
        return Verdict("fail", clean_reason(last[4:].lstrip(" :\t")) or "no reason given", "stdout")
    return Verdict("error", f"the verifier's last line is neither PASS nor FAIL (exit {exit_code}): "
                   f"{clean_reason(last)[:200]}")


def _is_fail_line(line: str) -> bool:
    return line == "FAIL" or line.startswith(("FAIL ", "FAIL:", "FAIL\t"))


def _is_verdict_line(line: str) -> bool:
    return line == "PASS" or _is_fail_line(line)


def clean_reason(text: str) -> str:
    """TEXT as one printable line of at most MAX_REASON characters."""
    flat = " ".join(_UNPRINTABLE.sub(" ", text).split())
    return flat if len(flat) <= MAX_REASON else flat[:MAX_REASON] + "..."
