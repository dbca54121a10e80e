"""`cu-run tasks lint`: every task's schema, scripts present, and every script's syntax."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.errors import UsageError
from runner.script_syntax import script_errors
from runner.tasks import load_task, resolve_suite_path


@dataclass(frozen=True)
class LintProblem:
    path: Path
    message: str


def lint_suite(name_or_path: str) -> tuple[int, list[LintProblem]]:
    """Checks every task folder of the suite; returns (tasks checked, problems)."""
    folder = resolve_suite_path(name_or_path)
    problems: list[LintProblem] = []
    task_dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not task_dirs:
        problems.append(LintProblem(folder, "holds no task folders"))
    for task_dir in task_dirs:
        try:
            load_task(task_dir)
        except UsageError as exc:
            problems.append(LintProblem(task_dir, exc.message))
        for script in sorted(list(task_dir.rglob("*.sh")) + list(task_dir.rglob("*.ps1"))):
            for error in script_errors(script):
                problems.append(LintProblem(script, error))
    return len(task_dirs), problems
