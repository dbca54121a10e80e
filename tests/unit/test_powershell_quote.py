"""Text reaches a guest's PowerShell only as a single-quoted literal; PowerShell closes such a
literal at any of five quote characters, so each must be escaped, or an agent-chosen path runs."""

import pytest

from runner.guest.powershell_quote import SINGLE_QUOTES, ps_quote


def powershell_single_quoted(source: str) -> tuple[str, str]:
    """A model of PowerShell's tokenizer for a single-quoted literal at the start of SOURCE
    (ScanStringLiteral): any IsSingleQuote character ends it unless another one follows, which
    makes the pair one literal quote. Returns (the literal's value, what follows it)."""
    assert source[0] in SINGLE_QUOTES
    value, i = "", 1
    while i < len(source):
        c = source[i]
        if c in SINGLE_QUOTES:
            if i + 1 < len(source) and source[i + 1] in SINGLE_QUOTES:
                value += source[i + 1]
                i += 2
                continue
            return value, source[i + 1:]
        value += c
        i += 1
    raise AssertionError("unterminated")


@pytest.mark.parametrize("hostile", [
    "plain", "it's", "x\u2019; Start-Process calc; \u2019", "\u2018\u2019\u201a\u201b'", "a\u201b\u201b'b",
    "line\r\nbreak; $(whoami)", "`$x`", "",
])
def test_a_quoted_value_is_read_back_whole_and_nothing_follows(hostile):
    value, rest = powershell_single_quoted(ps_quote(hostile))
    assert value == hostile and rest == ""


def test_only_the_apostrophe_doubled_would_let_a_typographic_quote_close_the_string():
    naive = "'" + "x\u2019; calc".replace("'", "''") + "'"
    _value, rest = powershell_single_quoted(naive)
    assert rest.startswith("; calc")  # the attack the helper stops
