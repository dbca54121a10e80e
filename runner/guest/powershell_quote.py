"""A PowerShell single-quoted string literal: how text reaches a guest's PowerShell (a guest
program's parameters are written with it too, as runner.guest.programs.ps_literal's quoted runs).

PowerShell's tokenizer ends a single-quoted string at any of five characters, not one: the ASCII
apostrophe and the typographic quotes U+2018, U+2019, U+201A and U+201B (its IsSingleQuote). Inside
such a string, any of them followed by any other of them is one literal quote. Doubling only the
apostrophe let a path holding a typographic quote close the string and run what followed it, and an
agent chooses the paths its file tools are given.
"""

from __future__ import annotations

SINGLE_QUOTES = "'\u2018\u2019\u201a\u201b"


def ps_quote(text: str) -> str:
    """TEXT as a single-quoted PowerShell string whose value is exactly TEXT."""
    return "'" + "".join(c + c if c in SINGLE_QUOTES else c for c in text) + "'"
