"""`cu-run tasks lint`: every task's schema, files and scripts; `run` applies the same checks."""

from __future__ import annotations

import ast
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner.errors import UsageError
from runner.profiles import PROFILES, GuestProfile
from runner.tasks.syntax import powershell_mistakes, script_errors
from runner.profiles.listing import WriteSetLister, matches
from runner.profiles.parts import ScriptLint
from runner.network.cassette import check_cassette
from runner.tasks.model import (
    STORED,
    SUITE_CASSETTES,
    SUITE_DEFAULTS,
    SUITE_SAFETY,
    Task,
    load_suite_cassettes,
    load_suite_defaults,
    load_suite_rules,
    load_task,
    resolve_suite_path,
)


@dataclass(frozen=True)
class LintProblem:
    path: Path
    message: str
    severity: Literal["error", "warning"] = "error"  # warnings do not stop a run


def lint_suite(name_or_path: str) -> tuple[int, list[LintProblem]]:
    """Checks every task folder of the suite, its safety.yaml and suite.yaml; returns (tasks checked, problems)."""
    folder = resolve_suite_path(name_or_path)
    problems: list[LintProblem] = []
    task_dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not task_dirs:
        problems.append(LintProblem(folder, "holds no task folders"))
    for name, load in ((SUITE_SAFETY, load_suite_rules), (SUITE_DEFAULTS, load_suite_defaults),
                       (SUITE_CASSETTES, load_suite_cassettes)):
        try:
            load(folder)
        except UsageError as exc:
            problems.append(LintProblem(folder / name, exc.message))
    for task_dir in task_dirs:
        guest = None
        try:
            task = load_task(task_dir)
        except UsageError as exc:
            problems.append(LintProblem(task_dir, exc.message))
        else:
            problems += lint_write_set(task) + lint_live_state(task) + lint_disk_verifier(task) + lint_cassette(task)
            guest = task.guest
        problems += lint_task_scripts(task_dir, guest)
    return len(task_dirs), problems


def lint_task_scripts(task_dir: Path, guest: GuestProfile | None = None) -> list[LintProblem]:
    """Every script's text and syntax, and what GUEST's ScriptLint says of its scripts (the task's
    own guest; None, for a task that did not load: the first profile of each script's extension).
    Only regular files are read: a FIFO named like a script would block `sh -n` forever
    (load_task refuses it with its own message)."""
    problems = []
    extensions = sorted({p.scripts.script_ext for p in PROFILES.values()})
    for script in sorted(s for ext in extensions for s in task_dir.rglob(f"*{ext}")):
        if not stat.S_ISREG(script.stat().st_mode if script.exists() else 0):
            continue
        try:
            script.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(LintProblem(script, f"not UTF-8 text (at byte {exc.start})"))
            continue
        problems += [LintProblem(script, error) for error in script_errors(script)]
        if script.suffix == ".ps1":
            problems += [LintProblem(script, mistake) for mistake in powershell_mistakes(script.read_text())]
        if guest is not None:
            lint = guest.part(ScriptLint) if script.suffix == guest.scripts.script_ext else None
        else:
            lint = next((part for p in PROFILES.values() if p.scripts.script_ext == script.suffix
                         and (part := p.part(ScriptLint)) is not None), None)
        if lint is not None and _privileged(task_dir, script):
            problems += [LintProblem(script, message) for message in lint.privileged_script_mistakes(script.read_text())]
        if lint is not None and _gives_a_verdict(task_dir, script):
            problems += [LintProblem(script, message, "warning") for message in lint.verdict_warnings(script.read_text())]
    return problems


def lint_cassette(task: Task) -> list[LintProblem]:
    """A replay: that names a file of the task's folder names a cassette (one kept in an asset
    store, sha256:HEX, is checked by the run that is given the store)."""
    named = task.spec.network.replay if task.spec.network is not None else None
    if named is None or STORED.match(named):
        return []
    path = task.folder / named
    if not path.is_file():
        return [LintProblem(task.folder / "task.yaml", f"replay: {named} is not a file of the task's folder")]
    try:
        check_cassette(path)
    except ValueError as exc:
        return [LintProblem(path, f"not a cassette: {exc}")]
    return []


def lint_disk_verifier(task: Task) -> list[LintProblem]:
    """A disk-scored task's verify.py parses as Python (it is compiled, never run: it runs on the
    host only in its sandbox, runner.scoring.disk_verifier)."""
    if task.spec.scoring != "disk":
        return []
    path = task.folder / "verify.py"
    try:
        ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError) as exc:
        return [LintProblem(path, f"not Python that parses: {exc}")]
    return []


def lint_write_set(task: Task) -> list[LintProblem]:
    """With the write set on, an oracle that touches watched paths must be allowed at least one
    of them: else the task's own solution scores "changed outside the allowed paths". (A path
    it only reads may stay watched, as a decoy; one allowed path is the least a solution needs.)"""
    oracle = task.script("oracle")
    write_set = task.spec.write_set
    guest = task.guest
    lister, lint = guest.part(WriteSetLister), guest.part(ScriptLint)
    if not write_set.enabled or oracle is None or lister is None or lint is None:
        return []
    windows = guest.windows_paths
    roots = write_set.watch or lister.default_watch
    covering = write_set.allow + write_set.ignore + lister.default_ignore
    watched = [p for p in dict.fromkeys(lint.script_paths(oracle.read_text(errors="replace")))
               if any(matches(p, root, windows=windows) for root in roots)]
    if not watched or any(matches(p, c, windows=windows) for p in watched for c in covering):
        return []
    return [LintProblem(task.folder / "task.yaml",
                        f"the oracle writes or reads {', '.join(watched)}, which the write set watches "
                        f"({', '.join(roots)}), and write_set.allow covers none of them: the task's own solution "
                        "would score 'changed outside the allowed paths'; add what the task asks for to "
                        "write_set.allow")]


def lint_live_state(task: Task) -> list[LintProblem]:
    """A task verified with the desktop alive: which of its checks ask a running program, whose
    answer a process kept from before the agent could give as the agent left it (a warning:
    some tasks can be checked no other way; the report marks their scores)."""
    lint = task.guest.part(ScriptLint)
    if not task.spec.desktop_in_verify or lint is None:
        return []
    scripts = [task.folder / f"verify{task.guest.scripts.script_ext}",
               *sorted((task.folder / "checkpoints").glob(f"*{task.guest.scripts.script_ext}")),
               *sorted((task.folder / "safety").glob(f"*{task.guest.scripts.script_ext}"))]
    return [LintProblem(script, message, "warning") for script in scripts if script.is_file()
            for message in lint.live_state_reads(script.read_text(errors="replace"))]


def errors(problems: list[LintProblem]) -> list[LintProblem]:
    return [p for p in problems if p.severity == "error"]


def _gives_a_verdict(task_dir: Path, script: Path) -> bool:
    relative = script.relative_to(task_dir)
    return relative.stem == "verify" and len(relative.parts) == 1 or \
        relative.parts[0] in ("checkpoints", "safety") and len(relative.parts) == 2


def _privileged(task_dir: Path, script: Path) -> bool:
    relative = script.relative_to(task_dir)
    return relative.stem in ("setup", "verify", "collect") and len(relative.parts) == 1 or \
        relative.parts[0] in ("checkpoints", "safety")
