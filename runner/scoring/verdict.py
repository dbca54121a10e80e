"""The verifier contract: the last non-empty line of stdout is PASS, or FAIL and a reason.

Anything else is a verifier error, never the agent's pass or fail: no output, a
traceback last, PASS followed by more output, a non-zero exit with no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Verdict:
    kind: Literal["pass", "fail", "error"]
    reason: str


def parse_verdict(stdout: str, exit_code: int) -> Verdict:
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        return Verdict("error", f"the verifier printed nothing (exit {exit_code})")
    last = lines[-1]
    if last == "PASS":
        if exit_code != 0:
            return Verdict("error", f"the verifier printed PASS but exited {exit_code}")
        return Verdict("pass", "")
    if last == "FAIL" or last.startswith(("FAIL ", "FAIL:", "FAIL\t")):
        reason = last[4:].lstrip(" :\t") or "no reason given"
        return Verdict("fail", reason)
    shown = last if len(last) <= 200 else last[:200] + "..."
    return Verdict("error", f"the verifier's last line is neither PASS nor FAIL (exit {exit_code}): {shown}")
