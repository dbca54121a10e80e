"""An sh program read as the commands it runs, well enough for lint rules (runner/tasks/guest_lint.py).

Not a shell: it never expands anything. Comments are skipped, continued lines joined and quotes
removed; a here-document's body is data, except where a shell reads it as its program. The
commands inside $(...), backquotes, a shell's -c string, `find -exec`, `xargs` and the wrappers
that run a command after their own options (exec, env, nohup, timeout, ...) are commands too. Each
command knows whether root runs it: what `runuser -u U --`, `su U -c`, `sudo -u U`, `setpriv
--reuid` or the privileged prelude's `as_user` (runner.tasks.scripts) starts runs as that user.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache


@dataclass
class Word:
    value: str  # quotes removed; expansions ($x, ${x}, $(...), `...`) kept as written
    line: int
    subs: list[tuple[str, int]] = field(default_factory=list)  # command substitutions: (text, first line)
    heredoc: tuple[str, int] | None = None  # a redirection's here-document: (body, first line)
    redirect: str = ""  # not an argument but a redirection's target, after this operator (">", "<<", ...)

    @property
    def expands(self) -> bool:
        return "$" in self.value or "`" in self.value


@dataclass(frozen=True)
class Invocation:
    """One command as it will run: NAME (its command word's last path part), its ARGS, the LINE of
    its command word, whether root runs it, and its REDIRECTS (made by the shell that runs it: by
    root when root runs that shell). A command of redirections alone has the NAME ""."""
    name: str
    args: tuple[Word, ...]
    line: int
    as_root: bool
    redirects: tuple[Word, ...] = ()


OPERATORS = ("&&", "||", ";;", ";&", ";", "&", "|", "(", ")")
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}", "!", "esac"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECTIONS = ("&>>", "&>", "<<<", "<<-", "<<", ">>", ">&", "<&", ">|", "<>", "<", ">")
OUTPUTS = ("&>>", "&>", ">>", ">&", ">|", "<>", ">")  # a file opened for writing (>& and <& with a number: a copy)
_PARAMETER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9#?@*$!-])?")


class _Lexer:
    """The simple commands of an sh text, each a list of words."""

    def __init__(self, text: str, first_line: int) -> None:
        self.text = text
        self.i = 0
        self.line = first_line
        self.heredocs: list[tuple[str, bool, Word]] = []
        self.commands: list[list[Word]] = []
        self.current: list[Word] = []
        self.pipeline: list[list[Word]] = []
        self.depth = 0

    def run(self) -> list[list[Word]]:
        text = self.text
        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r":
                self.i += 1
            elif text.startswith("\\\n", self.i):
                self.i += 2
                self.line += 1
            elif c == "#":
                while self.i < len(text) and text[self.i] != "\n":
                    self.i += 1
            elif c == "\n":
                self.i += 1
                self.line += 1
                self._end()
                self._read_heredocs()
            elif c in "<>" or text.startswith("&>", self.i):
                self._redirect()
            elif (op := next((o for o in OPERATORS if text.startswith(o, self.i)), None)) is not None:
                self.i += len(op)
                self._operator(op)
            elif (word := self._word()) is not None:
                self.current.append(word)
        self._end()
        return self.commands

    def _operator(self, op: str) -> None:
        if op == "|":
            self.pipeline.append(self.current)
            self.current = []
        elif op == "(":
            self.current = []  # name() { ...: a function's name, not a command
            self.depth += 1
            self._end()
        elif op == ")" and self.depth == 0:  # a case pattern's end: what came since is the pattern
            self.pipeline, self.current = [], []
        else:
            self.depth -= op == ")"
            self._end()

    def _end(self) -> None:
        self.commands.extend(c for c in [*self.pipeline, self.current] if c)
        self.pipeline, self.current = [], []

    def _redirect(self) -> None:
        text = self.text
        if self.current and self.current[-1].value.isdigit() and text[self.i - 1].isdigit():
            self.current.pop()  # 2>: a file descriptor, not a word
        op = next(o for o in _REDIRECTIONS if text.startswith(o, self.i))
        self.i += len(op)
        while self.i < len(text) and text[self.i] in " \t":
            self.i += 1
        target = self._word()
        if target is None:
            return
        kept = Word(target.value, target.line, target.subs, redirect=op)  # its $(...) still runs
        self.current.append(kept)
        if op in ("<<", "<<-"):
            self.heredocs.append((target.value, op == "<<-", kept))

    def _read_heredocs(self) -> None:
        for delimiter, strip, word in self.heredocs:
            first, body = self.line, []
            while self.i < len(self.text):
                end = self.text.find("\n", self.i)
                end = len(self.text) if end < 0 else end
                line = self.text[self.i:end]
                self.i = end + 1
                self.line += 1
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                body.append(line)
            word.heredoc = ("\n".join(body), first)
        self.heredocs = []

    def _word(self) -> Word | None:
        text, start, start_line = self.text, self.i, self.line
        value: list[str] = []
        subs: list[tuple[str, int]] = []
        while self.i < len(text):
            c = text[self.i]
            if c in " \t\r\n<>" or any(text.startswith(o, self.i) for o in OPERATORS):
                break
            if c == "'":
                end = text.find("'", self.i + 1)
                end = len(text) if end < 0 else end
                value.append(text[self.i + 1:end])
                self.line += value[-1].count("\n")
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted(value, subs)
            elif c == "\\":
                if text.startswith("\\\n", self.i):
                    self.line += 1
                else:
                    value.append(text[self.i + 1:self.i + 2])
                self.i += 2
            elif c in "$`":
                value.append(self._expansion(subs))
            else:
                value.append(c)
                self.i += 1
        if self.i == start:
            return None
        return Word("".join(value), start_line, subs)

    def _double_quoted(self, value: list[str], subs: list[tuple[str, int]]) -> None:
        text = self.text
        while self.i < len(text) and text[self.i] != '"':
            c = text[self.i]
            if c == "\\" and self.i + 1 < len(text):
                following = text[self.i + 1]
                if following == "\n":
                    self.line += 1
                else:
                    value.append(following if following in '$`"\\' else c + following)
                self.i += 2
            elif c in "$`":
                value.append(self._expansion(subs))
            else:
                self.line += c == "\n"
                value.append(c)
                self.i += 1
        self.i += 1

    def _expansion(self, subs: list[tuple[str, int]]) -> str:
        """The expansion at self.i, as written; a command substitution's text joins SUBS."""
        text, start, line = self.text, self.i, self.line
        if text.startswith("`", start):
            end = start + 1
            while end < len(text) and text[end] != "`":
                end += 2 if text[end] == "\\" else 1
            self.i = min(end + 1, len(text))
            subs.append((text[start + 1:end], line))
        elif text.startswith("$((", start):
            self.i = self._balanced(start + 1, "(", ")")
        elif text.startswith("$(", start):
            self.i = self._balanced(start + 1, "(", ")")
            subs.append((text[start + 2:self.i - 1], line))
        elif text.startswith("${", start):
            self.i = self._balanced(start + 1, "{", "}")
        else:
            match = _PARAMETER.match(text, start)
            self.i = match.end() if match else start + 1
        written = text[start:self.i]
        self.line += written.count("\n")
        return written

    def _balanced(self, at: int, opening: str, closing: str) -> int:
        """The index just past the CLOSING that matches the OPENING at AT, quotes skipped."""
        text, depth, i = self.text, 0, at
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 1
            elif c == "'" and opening == "(":
                i = text.find("'", i + 1)
                i = len(text) if i < 0 else i
            elif c == '"':
                i += 1
                while i < len(text) and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
            elif c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return i + 1
            i += 1
        return len(text)


@cache
def commands(text: str, first_line: int = 1) -> tuple[tuple[Word, ...], ...]:
    """The simple commands of the sh text TEXT, whose first line is FIRST_LINE in its file."""
    return tuple(tuple(c) for c in _Lexer(text, first_line).run())


# -- from words to what runs

# Commands that run the command after their own options, as the same user; each with its options
# that take a value in the next word.
_WRAPPERS: dict[str, tuple[str, ...]] = {
    "exec": ("-a",), "command": (), "builtin": (), "nohup": (), "setsid": (), "time": (), "stdbuf": ("-i", "-o", "-e"),
    "nice": ("-n",), "ionice": ("-c", "-n", "-p", "-P", "-u"), "env": ("-u", "-C", "-S"), "timeout": ("-s", "-k"),
    "xargs": ("-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"), "chroot": (), "flock": ("-w", "-E"),
    "unshare": (), "doas": ("-u", "-C"),
}
_FIRST_OPERAND_IS_NOT_THE_COMMAND = ("timeout", "chroot", "flock")  # a duration, a new root, a lock file
SHELLS = {"sh", "bash", "dash", "ash", "ksh", "zsh", "mksh"}
SHELL_VALUED = ("-o", "+o", "-O", "+O", "--rcfile", "--init-file")
SWITCH_VALUED = ("-u", "-g", "-G", "-s", "-c", "-w", "-C", "-h", "-p", "-r", "-t", "-U", "--user", "--group",
                 "--shell", "--command", "--reuid", "--regid", "--groups")


def leading_options(args: list[Word], valued: tuple[str, ...]) -> tuple[list[Word], list[Word]]:
    """ARGS split into the options before the first operand (each valued option with its value
    word) and the rest; `--` ends the options and is dropped."""
    i = 0
    while i < len(args):
        value = args[i].value
        if value == "--":
            return args[:i], args[i + 1:]
        if not value.startswith(("-", "+")) or value in ("-", "+"):
            break
        i += 2 if value in valued else 1
    return args[:i], args[i:]


def short_letters(option: str, valued: str) -> str:
    """The letters of a cluster of short options such as -ec, up to the first one that takes a
    value (VALUED letters), whose value is the rest of the word."""
    if option.startswith("--") or not option.startswith(("-", "+")):
        return ""
    letters = ""
    for letter in option[1:]:
        letters += letter
        if letter in valued:
            break
    return letters


def _invocations(words: list[Word], as_root: bool, stdin: tuple[str, int] | None) -> Iterator[Invocation]:
    for word in words:
        for sub, line in word.subs:
            yield from invocations(sub, line, as_root)
        if word.heredoc is not None:
            stdin = word.heredoc
    redirects = tuple(w for w in words if w.redirect)
    words = [w for w in words if not w.redirect]
    while words and (ASSIGNMENT.match(words[0].value) or words[0].value in RESERVED):
        words.pop(0)
    if not words or words[0].value in ("for", "case", "in", "select"):
        if redirects:
            yield Invocation("", (), redirects[0].line, as_root, redirects)
        return
    name = words[0].value.rsplit("/", 1)[-1]
    args = words[1:]
    yield Invocation(name, tuple(args), words[0].line, as_root, redirects)
    if name in _WRAPPERS:
        options, rest = leading_options(args, _WRAPPERS[name])
        if name == "command" and {"-v", "-V"} & {o.value for o in options}:
            return  # a look-up, not a run
        while name == "env" and rest and ASSIGNMENT.match(rest[0].value):
            rest = rest[1:]
        if name in _FIRST_OPERAND_IS_NOT_THE_COMMAND:
            rest = rest[1:]
        yield from _invocations(rest, as_root, stdin)
    elif name == "as_user":  # runner.tasks.scripts' prelude: CMD as the desktop user
        yield from _invocations(args, False, stdin)
    elif name in ("runuser", "su", "setpriv", "sudo"):
        yield from _switched(name, args, as_root, stdin)
    elif name in SHELLS:
        options, rest = leading_options(args, SHELL_VALUED)
        if any("c" in short_letters(o.value, "oO") for o in options):
            if rest:
                yield from invocations(rest[0].value, rest[0].line, as_root)
        elif stdin is not None and (not rest or any("s" in short_letters(o.value, "oO") for o in options)):
            yield from invocations(stdin[0], stdin[1], as_root)  # the shell's program is the here-document
    elif name == "find":
        starts = [i for i, a in enumerate(args) if a.value in ("-exec", "-execdir", "-ok", "-okdir")]
        for start in starts:
            end = next((j for j in range(start + 1, len(args)) if args[j].value in (";", "+")), len(args))
            yield from _invocations(args[start + 1:end], as_root, None)


def _switched(name: str, args: list[Word], as_root: bool, stdin: tuple[str, int] | None) -> Iterator[Invocation]:
    """What runuser, su, setpriv or sudo runs, and as whom."""
    if name == "su" or (name == "runuser" and not any(w.value in ("-u", "--user") for w in args)):
        # su-style, options anywhere: [-] [USER], its shell's -c string run as USER (root if none)
        values = [w.value for w in args]
        command = next((args[i + 1] for i, v in enumerate(values[:-1]) if v in ("-c", "--command")), None)
        skip = {i + 1 for i, v in enumerate(values) if v in SWITCH_VALUED}
        users = [w.value for i, w in enumerate(args) if i not in skip and not w.value.startswith("-")]
        as_user = as_root and (not users or users[0] in ("root", "0"))
        if command is not None:
            yield from invocations(command.value, command.line, as_user)
        elif stdin is not None:
            yield from invocations(stdin[0], stdin[1], as_user)
        return
    options, rest = leading_options(args, SWITCH_VALUED)
    other = any(o.value in ("-u", "--user") or o.value.startswith(("--reuid", "--user=")) for o in options)
    yield from _invocations(rest, as_root and not other, stdin)


def invocations(text: str, first_line: int = 1, as_root: bool = True) -> Iterator[Invocation]:
    """Every command the sh program TEXT runs, those it starts included (see the module's text)."""
    for command in commands(text, first_line):
        yield from _invocations(list(command), as_root, None)


@cache
def program(text: str) -> tuple[Invocation, ...]:
    """invocations(TEXT) of a program that runs as root, kept."""
    return tuple(invocations(text))


_DECLARATIONS = ("export", "readonly", "local", "declare", "typeset")
_DEFAULT_ASSIGNMENT = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?=")


@cache
def constants(text: str) -> dict[str, tuple[str, ...]]:
    """The values the variables of TEXT may take, for each variable that only ever takes literals:
    assigned (NAME=literal, export NAME=literal, ...), or a `for` loop's over literal words. A
    variable that `read`, a loop over expansions or ${NAME:=...} sets is not one of them."""
    seen: dict[str, list[str]] = {}
    for command in commands(text):
        values = [w.value for w in command if not w.redirect]
        while values and values[0] in RESERVED:
            values.pop(0)
        assigned = [v for v in values if ASSIGNMENT.match(v)]
        if values[:1] == ["for"] and values[2:3] == ["in"]:
            seen.setdefault(values[1], []).extend(values[3:] or ["$@"])
        elif values[:1] == ["for"] and len(values) > 1:
            seen.setdefault(values[1], []).append("$@")
        elif values and (len(assigned) == len(values) or values[0] in _DECLARATIONS):
            for value in assigned:
                name, _, literal = value.partition("=")
                seen.setdefault(name, []).append(literal)
        else:
            while values and ASSIGNMENT.match(values[0]):
                values.pop(0)
            if values[:1] in (["read"], ["getopts"]):
                for name in values[1:]:
                    seen.setdefault(name, []).append("$read")
    for name in _DEFAULT_ASSIGNMENT.findall(text):
        seen.setdefault(name, []).append("$default")
    return {name: tuple(v) for name, v in seen.items() if not any("$" in x or "`" in x for x in v)}
