"""The scoring environment: a venv of its own for a benchmark's metric functions and the packages
they import, and the benchmark's code those functions come from.

    cu-run scoring env [--evaluators SOURCE] [--wheels DIR]
    cu-run scoring download DIR          on a connected machine: the wheels, for --wheels

SOURCE is `desktop-env==VERSION` (PyPI; 1.0.2 by default) or the path of a lab's checkout of
OSWorld (the folder holding `desktop_env/`). The packages are pinned in
scoring-requirements.txt and installed without their dependencies' resolution, so the same
pins give the same venv; torch is never among them. Offline, --wheels installs from a folder.

The venv is made once per (pins, source) under the cache, in a temporary folder renamed into
place when complete: an interrupted build leaves nothing that looks ready.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.errors import InfraError, UsageError

REQUIREMENTS = Path(__file__).with_name("scoring-requirements.txt")
DEFAULT_EVALUATORS = "desktop-env==1.0.2"
# Modules the venv leaves out on purpose: importing them works (upstream imports them at the top of
# its modules), using them fails the metric (runner.benchmarks.score_entry).
LEFT_OUT = {"easyocr": "needs torch", "librosa": "needs numba and llvmlite",
            # imported at the top of upstream's Chrome getters; only the getters that reach a live
            # browser or Google Drive use them, and those tasks do not run here
            "playwright": "drives a live browser (its tasks do not run here)",
            "pydrive": "reads Google Drive (its tasks do not run here)"}
METRICS_DIR = ("desktop_env", "evaluators", "metrics")
_PYPI_SPEC = re.compile(r"^(desktop-env)==([0-9][0-9A-Za-z.+-]*)$")


@dataclass(frozen=True)
class ScoringEnv:
    python: Path
    package_root: Path  # holds desktop_env/
    source: str  # as given: desktop-env==1.0.2, or a checkout's path
    version: str  # desktop-env 1.0.2, or the checkout's commit
    evaluators_sha256: str  # of the metrics' and getters' files

    @property
    def left_out(self) -> tuple[str, ...]:
        return tuple(LEFT_OUT)

    def provenance(self) -> dict[str, str]:
        return {"source": self.source, "version": self.version, "evaluators_sha256": self.evaluators_sha256}


def scoring_root(cache_dir: Path) -> Path:
    return cache_dir / "scoring"


def ensure_env(cache_dir: Path, source: str | None = None, wheels: Path | None = None,
               say: Callable[[str], None] = lambda _m: None) -> ScoringEnv:
    """The scoring env for SOURCE, made if missing."""
    source = source or DEFAULT_EVALUATORS
    pypi = _PYPI_SPEC.match(source)
    checkout = None if pypi else _checkout(Path(source))
    pins = REQUIREMENTS.read_text()
    key = hashlib.sha256((pins + "\0" + (source if pypi else "checkout")).encode()).hexdigest()[:16]
    folder = scoring_root(cache_dir) / key
    if not (folder / "ready").is_file():
        _build(folder, pins, source if pypi else None, wheels, say)
    python = folder / "venv" / "bin" / "python3"
    package_root = checkout or _site_packages(folder / "venv")
    if not (package_root.joinpath(*METRICS_DIR) / "__init__.py").is_file():
        raise InfraError(f"{package_root} has no {'/'.join(METRICS_DIR)}/__init__.py",
                         fix=f"rm -rf {folder} and run cu-run scoring env again")
    version = f"desktop-env {pypi.group(2)}" if pypi else _commit(package_root)
    return ScoringEnv(python, package_root, source if pypi else str(checkout), version,
                      evaluators_sha256(package_root))


def _checkout(path: Path) -> Path:
    path = path.expanduser().resolve()
    if not (path.joinpath(*METRICS_DIR) / "__init__.py").is_file():
        raise UsageError(f"--evaluators {path}: not a checkout of OSWorld (no {'/'.join(METRICS_DIR)}/__init__.py), "
                         f"and not a PyPI pin like {DEFAULT_EVALUATORS}",
                         fix="pass the folder that holds desktop_env/, or desktop-env==VERSION")
    return path


def _build(folder: Path, pins: str, pypi: str | None, wheels: Path | None, say: Callable[[str], None]) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():
        shutil.rmtree(folder)  # a build that did not finish
    where = f"from {wheels}" if wheels else "from PyPI"
    say(f"making the scoring venv {where} (once; about 750 MiB, no torch) in {folder}")
    with tempfile.TemporaryDirectory(prefix=".building-", dir=folder.parent) as building:
        work = Path(building)
        subprocess.run([sys.executable if _is_system_python() else "python3", "-m", "venv", str(work / "venv")],
                       check=True, capture_output=True)
        (work / "requirements.txt").write_text(pins + (f"{pypi}\n" if pypi else ""))
        source = ["--no-index", "--find-links", str(wheels)] if wheels else []
        done = subprocess.run([str(work / "venv" / "bin" / "python3"), "-m", "pip", "install", "--quiet",
                               "--disable-pip-version-check", "--no-deps", *source, "-r", str(work / "requirements.txt")],
                              capture_output=True, text=True)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING")]
            fix = f"check {wheels} holds every pin of {REQUIREMENTS.name} (cu-run scoring download DIR makes it)" \
                if wheels else "check PyPI is reachable, or install offline with --wheels DIR"
            raise InfraError("could not install the scoring venv's packages: " + " ".join(lines[-3:])[-500:], fix=fix)
        (work / "ready").write_text(json.dumps({"pins_sha256": hashlib.sha256(pins.encode()).hexdigest(),
                                                "evaluators": pypi or "checkout"}) + "\n")
        work.rename(folder)
        # TemporaryDirectory's cleanup finds nothing left to remove.
        work.mkdir()


def _is_system_python() -> bool:
    return sys.prefix == sys.base_prefix


def download_wheels(target: Path, source: str | None = None) -> None:
    """On a connected machine: every pinned package's wheel (and desktop-env's) into TARGET."""
    target.mkdir(parents=True, exist_ok=True)
    extra = [source or DEFAULT_EVALUATORS] if _PYPI_SPEC.match(source or DEFAULT_EVALUATORS) else []
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                           "--no-deps", "--only-binary=:all:", "-d", str(target), "-r", str(REQUIREMENTS), *extra],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise InfraError(f"could not download the scoring wheels: {done.stderr.strip()[-500:]}",
                         fix="check PyPI is reachable from this machine")


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise InfraError(f"{venv} has no site-packages", fix=f"rm -rf {venv.parent} and run cu-run scoring env again")
    return found[0]


def evaluators_sha256(package_root: Path) -> str:
    """A hash of the metrics' and getters' Python files (the Chrome profile getters run on the
    host too): what scored, in a run's provenance."""
    digest = hashlib.sha256()
    evaluators = package_root.joinpath(*METRICS_DIR).parent
    for path in sorted([*evaluators.joinpath("metrics").rglob("*.py"), *evaluators.joinpath("getters").rglob("*.py")]):
        digest.update(str(path.relative_to(evaluators)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _commit(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return f"checkout {done.stdout.strip()}" if done.returncode == 0 else f"checkout {root} (not a git checkout)"
