"""Helpers for unit tests that need a run folder on disk (no VMs)."""

from pathlib import Path

from runner.records.results import ResultLog


def write_results(folder: Path, records) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    log = ResultLog(folder)
    for record in records:
        log.append(record)
    return folder
