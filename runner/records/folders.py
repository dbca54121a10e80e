"""What a folder given to `report`, `export inspect` or `compare` is: a run's --out folder, or a
`validate` folder (an oracle run and a nop run beside a verdict), with one clear message otherwise."""

from __future__ import annotations

from pathlib import Path

from runner.errors import UsageError
from runner.records.results import RESULTS

VALIDATION = "validation.json"  # what `validate` writes at the top of its folder: the verdict and its runs
VALIDATE_RUNS = ("oracle", "nop")


def is_run_folder(path: Path) -> bool:
    return (path / RESULTS).is_file() or (path / "run.json").is_file()


def is_validation_folder(path: Path) -> bool:
    return (path / VALIDATION).is_file()


def run_folders(path: Path) -> list[Path]:
    """The run folders PATH stands for: itself, or a validate folder's oracle and nop runs."""
    if is_validation_folder(path):
        return [path / name for name in VALIDATE_RUNS if is_run_folder(path / name)]
    if is_run_folder(path):
        return [path]
    raise not_a_run_folder(path)


def not_a_run_folder(path: Path) -> UsageError:
    """Says what PATH is instead, and what to pass."""
    fix = "pass the --out folder of `cu-run run` (runs/<suite>-<agent>-<time>) or of `cu-run validate`"
    if not path.exists():
        return UsageError(f"{path} does not exist", fix=fix)
    if not path.is_dir():
        return UsageError(f"{path} is a file, not a run folder", fix=fix)
    entries = sorted(p.name for p in path.iterdir())
    found = ", ".join(entries[:8]) + (", ..." if len(entries) > 8 else "") if entries else "nothing"
    runs = [p.name for p in path.iterdir() if p.is_dir() and (is_run_folder(p) or is_validation_folder(p))]
    if runs:
        fix = f"pass one of the run folders in it: {', '.join(str(path / r) for r in sorted(runs)[:5])}"
    return UsageError(f"{path} is not a run folder: it holds no {RESULTS}, run.json or {VALIDATION} "
                      f"(it holds {found})", fix=fix)
