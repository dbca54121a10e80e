"""What `tasks lint` says of a linux task's sh scripts: read as text, roughly as sh reads a line, never run."""

from __future__ import annotations

import re

from runner.profiles.parts import ScriptLint
from typing_extensions import override

# A verdict printed on stdout (the older contract), and one that carries data: an expansion
# after PASS/FAIL in the same echo or printf.
_STDOUT_VERDICT = re.compile(r"\b(echo|printf)\b[^;|&]*?['\"]?\b(PASS|FAIL)\b")
_FROM_COMMAND = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=[\"']?(?:\$\(|`)")
_READ = re.compile(r"\bread\b(?:\s+-[a-z]+)*((?:\s+[A-Za-z_][A-Za-z0-9_]*)+)")
_HOME_VAR = re.compile(r"\$HOME\b|\$\{HOME[}:]")
_TILDE = re.compile(r"(?<![\w/$])~/")
# Commands that ask a running program, not the disk: the X server, the session bus and what it
# starts, accessibility, the process table, and as_user (the user's own programs and settings).
_LIVE_STATE = re.compile(r"(?<![\w.-])(xdotool|xprop|xwininfo|wmctrl|xdpyinfo|xwd|xclip|xsel|dbus-send|gdbus|"
                         r"busctl|qdbus|xfconf-query|gsettings|dconf|pyatspi|pgrep|pidof|ps|as_user)(?![\w.-])")


class LinuxScriptLint(ScriptLint):
    @override
    def script_paths(self, text: str) -> list[str]:
        found = re.findall(r"""(?:\$HOME|\$\{HOME\}|~)(/[^\s"'`;|&<>()$]*)""", text)
        return ["~" + p.rstrip("/") for p in found if p.strip("/")]

    @override
    def privileged_script_mistakes(self, text: str) -> list[str]:
        """$HOME and ~ are root's in a privileged script; the desktop user's home is $USER_HOME.
        Comments do not count."""
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            # The shell expands $HOME outside single quotes, and ~ only where no quote is around it.
            expanded, bare = _shell_expanding(_code_of(line))
            if _HOME_VAR.search(expanded) or _TILDE.search(bare):
                found.append(f"line {number}: runs as the admin, whose home $HOME (and ~) is not the desktop "
                             "user's: use $USER_HOME")
        return found

    @override
    def verdict_warnings(self, text: str) -> list[str]:
        # Data: what a command printed (x=$(...), read x): a file's content, a listing.
        data = set(_FROM_COMMAND.findall(text)) | {n for names in _READ.findall(text) for n in names.split()}
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            code = _code_of(line)
            verdict = _STDOUT_VERDICT.search(code)
            if not verdict:
                continue
            shown = code[verdict.start():]
            if "$(" in shown or "`" in shown or any(re.search(rf"\$\{{?{n}\b", shown) for n in data):
                found.append(f"line {number}: echoes what a command printed into its verdict line: a newline in "
                             "that text (or, under dash, a backslash escape) can forge a PASS; use verdict fail "
                             "\"REASON\", and printf '%s' for data")
            else:
                found.append(f"line {number}: prints its verdict on stdout; use verdict pass / verdict fail REASON, "
                             "which agent text cannot forge")
        return found

    @override
    def live_state_reads(self, text: str) -> list[str]:
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            asked = sorted({m.group(1) for m in _LIVE_STATE.finditer(_code_of(line))})
            if asked:
                found.append(f"line {number}: asks a running program ({', '.join(asked)}): desktop_in_verify keeps "
                             "what ran before the agent, which the agent may have driven; prefer what the app saved "
                             "to disk, or check the answer against it")
        return found


def _shell_expanding(code: str) -> tuple[str, str]:
    """CODE with single-quoted text blanked (where $ does not expand), and with all quoted text
    blanked (where ~ does not): a line at a time, roughly as sh reads it."""
    expanded, bare, quote, escaped = [], [], "", False
    for char in code:
        if escaped:
            escaped = False
            expanded.append(" ")
            bare.append(" ")
            continue
        if char == "\\" and quote != "'":
            escaped = True
        elif quote == "" and char in "'\"":
            quote = char
        elif char == quote:
            quote = ""
        expanded.append(" " if quote == "'" else char)
        bare.append(char if quote == "" else " ")
    return "".join(expanded), "".join(bare)


def _code_of(line: str) -> str:
    """LINE without its comment (roughly: a # that starts a word)."""
    if line.lstrip().startswith("#"):
        return ""
    return re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
