"""Guest programs: files under guest_agent/, read at run time and sent whole.

The code that runs in a guest, much of it as root, lives in files (guest_agent/linux/*.sh and
*.py, guest_agent/windows/*.ps1), never in Python strings, so linters read it as what it is:
shellcheck for sh, ruff for Python, a PowerShell grammar for PowerShell, and the rules of
tests/unit/test_guest_programs.py for what a privileged program must never do. The package carries
the folder as runner/_data/guest_agent (pyproject.toml), found through runner.config.DATA_ROOT.

A program's inputs are never formatted into its text. An sh program gets them as variables
assigned in front of it, each value single-quoted by shlex; the file names each one it reads with
`: "${NAME?}"`, so a program sent without one stops there, and shellcheck knows it is set. A Python
program gets them as arguments after its text. A PowerShell program declares them in its param
block and is sent as a script block called with them, each value a literal (ps_program).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from functools import cache

from runner.config import DATA_ROOT
from runner.guest.powershell_quote import ps_quote

GUEST_PROGRAMS = DATA_ROOT / "guest_agent"
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


@cache
def program_text(relative: str) -> str:
    """The text of guest_agent/RELATIVE, as the package ships it."""
    return (GUEST_PROGRAMS / relative).read_text(encoding="utf-8")


def sh_assignments(params: dict[str, str | int | float]) -> str:
    """Lines NAME='value' for PARAMS, each value shlex-quoted; names are upper case, checked."""
    lines = []
    for name, value in params.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"a guest program's parameter is NAME in upper case, not {name!r}")
        lines.append(f"{name}={shlex.quote(str(value))}\n")
    return "".join(lines)


def sh_program(relative: str, *, arguments: Sequence[str | int | float] | None = None,
               **params: str | int | float) -> str:
    """The sh program guest_agent/RELATIVE with PARAMS assigned in front of it. ARGUMENTS (a list
    of any length, such as paths) become its "$@" by a `set --` line; without them it has those of
    the shell it runs in."""
    words = "" if arguments is None else f"set --{''.join(' ' + shlex.quote(str(a)) for a in arguments)}\n"
    return sh_assignments(params) + words + program_text(relative)


def python_command(relative: str, *args: str | int | float, site: bool = True) -> str:
    """An sh command line that runs the Python program guest_agent/RELATIVE isolated (-I: no
    user site, no PYTHON* variables, no script folder on the path) with ARGS. SITE False adds -S
    (no site module: half of Python's start under TCG) for a program that imports nothing it needs."""
    flags = "-I" if site else "-I -S"
    words = " ".join(shlex.quote(str(a)) for a in args)
    return f"python3 {flags} -c {shlex.quote(program_text(relative))}{' ' + words if words else ''}"


PsValue = str | int | float | tuple[str, ...]


def ps_program(relative: str, *, dot_sourced: bool = False, **arguments: PsValue) -> str:
    """The PowerShell program guest_agent/RELATIVE as a script block, called with ARGUMENTS for
    the parameters its param block declares. The program's text is the file's, unchanged; each
    value is written by ps_value, so no value can be taken for code.

    The block runs in a scope of its own (`&`): its variables end with it, while what is not
    scoped (the environment, the working folder, the process's exit) outlasts it. DOT_SOURCED
    runs it in the caller's scope (`.`) instead, for a program that defines functions for the
    script after it: those functions, and its parameters, stay there."""
    given = " ".join(f"-{key} {ps_value(value)}" for key, value in arguments.items())
    call = "." if dot_sourced else "&"
    return f"{call} {{\r\n{program_text(relative)}\r\n}} {given}\r\n"


def ps_value(value: PsValue) -> str:
    """VALUE as a PowerShell argument: a string as ps_literal writes it, a tuple of strings as an
    array of them, a number as digits."""
    if isinstance(value, str):
        return ps_literal(value)
    if isinstance(value, tuple):
        return "@(" + ", ".join(ps_literal(v) for v in value) + ")"
    return f"{value:g}" if isinstance(value, float) else str(int(value))


def ps_literal(text: str) -> str:
    """TEXT as a PowerShell expression whose value is exactly TEXT, written in printable ASCII:
    only printable ASCII goes between quotes (ps_quote's), and any other character is [char]0xNNNN,
    one per UTF-16 unit (the units a .NET string holds). A program's arguments then hold no
    typographic quote (see runner/guest/powershell_quote.py), line break or control character
    for any reader of the script to take differently."""
    units = text.encode("utf-16-le", "surrogatepass")
    parts: list[str] = []
    run = ""
    for i in range(0, len(units), 2):
        unit = int.from_bytes(units[i:i + 2], "little")
        if 0x20 <= unit < 0x7F:
            run += chr(unit)
            continue
        if run or not parts:
            parts.append(ps_quote(run))
            run = ""
        parts.append(f"[char]0x{unit:04X}")
    if run or not parts:
        parts.append(ps_quote(run))
    return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"
