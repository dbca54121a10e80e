"""Syntax checks of task and provisioning scripts, without running them.

PowerShell is parsed with a real grammar (tree-sitter-powershell); sh with `sh -n`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import tree_sitter_powershell
from tree_sitter import Language, Node, Parser

_POWERSHELL = Language(tree_sitter_powershell.language())


def powershell_errors(source: bytes) -> list[str]:
    """'line L, column C: ...' for each syntax error; empty when the script parses."""
    tree = Parser(_POWERSHELL).parse(source)
    if not tree.root_node.has_error:
        return []
    errors: list[str] = []
    _collect(tree.root_node, source, errors)
    return errors or ["the parser reports an error it could not place"]


def _collect(node: Node, source: bytes, errors: list[str]) -> None:
    if node.is_error or node.is_missing:
        line, col = node.start_point
        if node.is_missing:
            what = f"missing {node.type!r}"
        else:
            text = source[node.start_byte:node.end_byte].decode(errors="replace").splitlines()
            what = f"unexpected {text[0][:60]!r}" if text else "unexpected input"
        errors.append(f"line {line + 1}, column {col + 1}: {what}")
        return
    for child in node.children:
        if child.has_error or child.is_missing:
            _collect(child, source, errors)


def sh_errors(path: Path) -> list[str]:
    try:
        result = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True, timeout=30,
                                stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return ["sh -n did not finish in 30 s"]
    if result.returncode == 0:
        return []
    return [line.strip() for line in result.stderr.splitlines() if line.strip()] or [f"sh -n exited {result.returncode}"]


def script_errors(path: Path) -> list[str]:
    if path.suffix == ".ps1":
        return powershell_errors(path.read_bytes())
    if path.suffix == ".sh":
        return sh_errors(path)
    return []


# -- PowerShell mistakes a grammar cannot see

_REGISTRY_NEW_ITEM = re.compile(r"\bNew-Item\b(?![^\r\n]*-ItemType[\s'\",]+(Directory|File)\b)[^\r\n]*-Force\b",
                                re.IGNORECASE)
_PER_ITEM_PROCESS = re.compile(
    r"-Recurse\b[^\r\n]*\|\s*(ForEach-Object|%)\s*\{[^\r\n]*\b(icacls|takeown|attrib|cacls|cmd|powershell|pwsh)"
    r"(\.exe)?\b", re.IGNORECASE)


def powershell_mistakes(text: str) -> list[str]:
    """Lines that parse but fail on a real Windows:
    - `New-Item -Force` on a registry key that exists deletes it first, with its values and
      subkeys; guard it with Test-Path on the same line (a missing key is made with its parents);
    - a process started per item of a recursive listing: a user profile holds thousands of items,
      and one process each runs for minutes; read or change them in one process, or list fewer."""
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("<#") else ""
        if _REGISTRY_NEW_ITEM.search(code) and not re.search(r"\bTest-Path\b", code, re.IGNORECASE):
            found.append(f"line {number}: New-Item -Force on a key that exists deletes it first (values and subkeys); "
                         "make it only when missing: if (-not (Test-Path -LiteralPath $key)) { New-Item ... -Force }")
        if _PER_ITEM_PROCESS.search(code):
            found.append(f"line {number}: starts a process per item of a recursive listing; do the work in one "
                         "process, or only for the items that need it")
    return found
