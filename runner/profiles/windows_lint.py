"""What `tasks lint` says of a windows task's PowerShell scripts: read as text, never run."""

from __future__ import annotations

import re

from runner.profiles.parts import ScriptLint
from typing_extensions import override


class WindowsScriptLint(ScriptLint):
    @override
    def script_paths(self, text: str) -> list[str]:
        paths = []
        for drive, _home, rest in re.findall(
                r"""(?:\b([A-Za-z]:)|(\$env:(?:USERPROFILE|USER_HOME)|~))(\\[^\r\n"'`;|<>()$]*)""", text):
            rest = rest.rstrip(" \\")
            if rest:
                paths.append((drive if drive else "~") + rest)
        return paths

    @override
    def privileged_script_mistakes(self, text: str) -> list[str]:
        """$env:USERPROFILE and HKCU: are the verifier account's own in a privileged script."""
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"\$env:USERPROFILE\b|\bHKCU:", code, re.IGNORECASE):
                found.append(f"line {number}: runs as the verifier account, whose profile and HKCU are not the "
                             "desktop user's: use $env:USER_HOME and Registry::HKEY_USERS\\$env:DESKTOP_USER_SID")
        return found

    @override
    def verdict_warnings(self, text: str) -> list[str]:
        # Data: a variable assigned from a command or an expression, not a literal.
        data = set(re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)\s*=\s*[^\s'\"0-9$]", text))
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            verdict = re.search(r"[\"']\s*(PASS|FAIL)\b", code)
            if not verdict:
                continue
            shown = code[verdict.start():]
            if "$(" in shown or " -f " in shown or any(re.search(rf"\$\{{?{n}\b", shown, re.IGNORECASE) for n in data):
                found.append(f"line {number}: puts what a command returned into its verdict line: a newline in that "
                             "text can forge a PASS; use Verdict fail \"REASON\"")
            else:
                found.append(f"line {number}: prints its verdict on stdout; use Verdict pass / Verdict fail REASON, "
                             "which agent text cannot forge")
        return found
