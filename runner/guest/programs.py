"""Guest programs: files under guest_agent/, read at run time and sent whole.

The code that runs in a guest, much of it as root, lives in files (guest_agent/linux/*.sh and
*.py, guest_agent/windows/*.ps1), never in Python strings, so linters read it as what it is:
shellcheck for sh, ruff for Python, a PowerShell grammar for PowerShell, and the rules of
tests/unit/test_guest_programs.py for what a privileged program must never do. The package carries
the folder as runner/_data/guest_agent (pyproject.toml), found through runner.config.DATA_ROOT.

A program's inputs are never formatted into its text. An sh program gets them as variables
assigned in front of it, each value single-quoted by shlex; the file names each one it reads with
`: "${NAME?}"`, so a program sent without one stops there, and shellcheck knows it is set. A Python
program gets them as arguments after its text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from functools import cache

from runner.config import DATA_ROOT

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
