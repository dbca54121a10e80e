"""`cu-run tasks lint`: every task's schema, files and scripts; `run` applies the same checks."""

from __future__ import annotations

import re
import stat
from dataclasses import dataclass
from pathlib import Path

from runner.errors import UsageError
from runner.script_syntax import script_errors
from runner.tasks import SUITE_SAFETY, load_suite_rules, load_task, resolve_suite_path


@dataclass(frozen=True)
class LintProblem:
    path: Path
    message: str


def lint_suite(name_or_path: str) -> tuple[int, list[LintProblem]]:
    """Checks every task folder of the suite and its safety.yaml; returns (tasks checked, problems)."""
    folder = resolve_suite_path(name_or_path)
    problems: list[LintProblem] = []
    task_dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not task_dirs:
        problems.append(LintProblem(folder, "holds no task folders"))
    try:
        load_suite_rules(folder)
    except UsageError as exc:
        problems.append(LintProblem(folder / SUITE_SAFETY, exc.message))
    for task_dir in task_dirs:
        try:
            load_task(task_dir)
        except UsageError as exc:
            problems.append(LintProblem(task_dir, exc.message))
        problems += lint_task_scripts(task_dir)
    return len(task_dirs), problems


def lint_task_scripts(task_dir: Path) -> list[LintProblem]:
    """Every script's text and syntax. Only regular files are read: a FIFO named like a
    script would block `sh -n` forever (load_task refuses it with its own message)."""
    problems = []
    for script in sorted(list(task_dir.rglob("*.sh")) + list(task_dir.rglob("*.ps1"))):
        if not stat.S_ISREG(script.stat().st_mode if script.exists() else 0):
            continue
        try:
            script.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(LintProblem(script, f"not UTF-8 text (at byte {exc.start})"))
            continue
        problems += [LintProblem(script, error) for error in script_errors(script)]
        if script.suffix == ".sh" and _privileged(task_dir, script):
            problems += [LintProblem(script, message) for message in _home_mistakes(script.read_text())]
    return problems


def _privileged(task_dir: Path, script: Path) -> bool:
    relative = script.relative_to(task_dir)
    return relative.name in ("setup.sh", "verify.sh") and len(relative.parts) == 1 or \
        relative.parts[0] in ("checkpoints", "safety")


_HOME = re.compile(r"\$HOME\b|\$\{HOME[}:]|(?<![\w/$])~/")


def _home_mistakes(text: str) -> list[str]:
    """Setup, verify and the checks run as the admin, whose $HOME is its own: the desktop
    user's home is $USER_HOME. Comments do not count."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        if _HOME.search(code):
            found.append(f"line {number}: runs as the admin, whose home $HOME (and ~) is not the desktop "
                         "user's: use $USER_HOME")
    return found
