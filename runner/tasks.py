"""Task suites as data: a suite is a folder of task folders, each with task.yaml and scripts.

    <suite>/<task-id>/task.yaml     id, instruction, profile, timeout_s, tags, difficulty
    <suite>/<task-id>/setup.<ext>   optional: puts the guest in a known state
    <suite>/<task-id>/verify.<ext>  last non-empty stdout line: PASS, or FAIL <reason>
    <suite>/<task-id>/oracle.<ext>  solves the task, proving it solvable and the verifier right

<ext> is the profile's: .sh (linux, run by sh) or .ps1 (windows, PowerShell). Any other
file in the folder travels into the guest with the scripts ($TASK_DIR / $env:TASK_DIR).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runner.config import PROJECT_ROOT
from runner.errors import UsageError

SUITES_DIR = PROJECT_ROOT / "tasks"
SCRIPT_EXT = {"linux": ".sh", "windows": ".ps1"}
REQUIRED_SCRIPTS = ("verify", "oracle")
OPTIONAL_SCRIPTS = ("setup",)

Profile = Literal["linux", "windows"]


class TaskSpec(BaseModel):
    """task.yaml, validated. Unknown fields are refused so a typo is not silently ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="equal to the task's folder name")
    instruction: str = Field(min_length=1, description="the only thing the agent sees")
    profile: Profile
    timeout_s: int = Field(default=300, gt=0, le=24 * 3600, description="the agent's wall-clock limit")
    tags: tuple[str, ...] = ()
    difficulty: Literal["easy", "medium", "hard"] | None = None

    @field_validator("instruction")
    @classmethod
    def _strip(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be blank")
        return value


@dataclass(frozen=True)
class Task:
    spec: TaskSpec
    folder: Path

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def ext(self) -> str:
        return SCRIPT_EXT[self.spec.profile]

    def script(self, kind: str) -> Path | None:
        path = self.folder / f"{kind}{self.ext}"
        return path if path.is_file() else None

    def files(self) -> list[Path]:
        """Every file that travels into the guest with the scripts."""
        return sorted(p for p in self.folder.rglob("*") if p.is_file() and p.name != "task.yaml")


@dataclass(frozen=True)
class Suite:
    name: str
    folder: Path
    tasks: tuple[Task, ...]

    def select(self, ids: list[str] | None) -> tuple[Task, ...]:
        if not ids:
            return self.tasks
        known = {t.id: t for t in self.tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise UsageError(f"suite {self.name} has no task {', '.join(map(repr, unknown))}",
                             fix=f"known tasks: {', '.join(known)}")
        return tuple(known[i] for i in ids)

    def content_hash(self) -> str:
        """A hash of every file of every task: the suite's identity in a run's provenance."""
        digest = hashlib.sha256()
        for task in self.tasks:
            for path in sorted(p for p in task.folder.rglob("*") if p.is_file()):
                digest.update(str(path.relative_to(self.folder)).encode() + b"\0" + path.read_bytes() + b"\0")
        return digest.hexdigest()


def resolve_suite_path(name_or_path: str) -> Path:
    """A built-in suite name (tasks/<name>) or a path to a suite folder."""
    candidate = Path(name_or_path)
    if candidate.is_dir():
        return candidate.resolve()
    built_in = SUITES_DIR / name_or_path
    if "/" not in name_or_path and built_in.is_dir():
        return built_in
    names = ", ".join(sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir())) if SUITES_DIR.is_dir() else "none"
    raise UsageError(f"no suite {name_or_path!r}: not a folder, and not a built-in suite ({names})",
                     fix="pass a built-in suite name or the path of a folder of tasks")


def load_suite(name_or_path: str) -> Suite:
    """Loads and checks every task; the first problem found is raised, naming file and field."""
    folder = resolve_suite_path(name_or_path)
    task_dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not task_dirs:
        raise UsageError(f"suite folder {folder} holds no task folders")
    return Suite(folder.name, folder, tuple(load_task(d) for d in task_dirs))


def load_task(folder: Path) -> Task:
    path = folder / "task.yaml"
    if not path.is_file():
        raise UsageError(f"{path}: missing; every task folder needs a task.yaml")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of fields (id, instruction, profile, ...), got {type(data).__name__}")
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: {_describe(exc)}") from exc
    if spec.id != folder.name:
        raise UsageError(f"{path}: field 'id' is {spec.id!r} but the folder is {folder.name!r}; they must be equal")
    task = Task(spec, folder)
    for kind in REQUIRED_SCRIPTS:
        if task.script(kind) is None:
            raise UsageError(f"{folder}: missing script {kind}{task.ext} (profile {spec.profile} needs "
                             f"{', '.join(k + task.ext for k in REQUIRED_SCRIPTS)})")
    return task


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(file)"
        got = error.get("input")
        shown = f" (got {got!r})" if error["type"] != "missing" and not isinstance(got, dict) else ""
        problems.append(f"field '{where}': {error['msg']}{shown}")
    return "; ".join(problems)
