"""Finds and removes what a killed runner left behind: cu- domains, episode folders and
half-made warm states.

A domain or folder is garbage when the process that made it is gone (pid and start
time, recorded in libvirt metadata and owner.json). Live runs are never touched
unless asked for with everything=True.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from runner.images.catalog import Catalog
from runner.config import Settings
from runner.vm.episode import EPISODE_OWNER_FILE
from runner.hypervisor.host import Host
from runner.owner import Owner
from runner.vm.warm_state import list_slots, warm_root


@dataclass
class GcReport:
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def collect_garbage(host: Host, settings: Settings, *, everything: bool = False, dry_run: bool = False) -> GcReport:
    """Removes what dead runners left (with EVERYTHING, live runs' too); DRY_RUN: only lists it, in
    report.removed, touching nothing."""
    report = GcReport()
    for dom in host.cu_domains():
        if dom.tag is None:
            report.kept.append(f"domain {dom.name} (no cu-run metadata: not ours to remove)")
            continue
        owner = Owner(dom.tag.owner_pid, dom.tag.owner_start)
        if owner.alive() and not everything:
            report.kept.append(f"domain {dom.name} (its runner, pid {owner.pid}, is alive)")
            continue
        if dry_run:
            report.removed.append(f"domain {dom.name}")
            _remove_folder(dom.tag.workdir, settings.episodes_dir, report, dry_run)
            continue
        try:
            host.destroy(dom.name)
            report.removed.append(f"domain {dom.name}")
        except Exception as exc:  # noqa: BLE001 - one leftover that cannot be removed must not stop the rest
            report.failed.append(f"domain {dom.name}: {exc}")
            continue
        _remove_folder(dom.tag.workdir, settings.episodes_dir, report)

    if settings.episodes_dir.is_dir():
        for folder in sorted(settings.episodes_dir.iterdir()):
            holder = folder_owner(folder)
            if holder is not None and holder.alive() and not everything:
                report.kept.append(f"episode folder {folder} (its runner, pid {holder.pid}, is alive)")
                continue
            if host.is_running(folder.name) and not everything:
                report.kept.append(f"episode folder {folder} (its domain is still running)")
                continue
            _remove_folder(folder, settings.episodes_dir, report, dry_run)
    _collect_warm(settings, everything, report, dry_run)
    return report


def _collect_warm(settings: Settings, everything: bool, report: GcReport, dry_run: bool = False) -> None:
    """Half-made warm states of dead warmers go; complete ones stay (they are the cache)."""
    for image in Catalog(settings.images_dir).images():
        root = warm_root(image)
        for partial in sorted(root.glob("slot-*.partial-*")) if root.is_dir() else []:
            owner = folder_owner(partial)
            if owner is not None and owner.alive() and not everything:
                report.kept.append(f"warm state being made {partial} (pid {owner.pid} is alive)")
                continue
            if dry_run:
                report.removed.append(f"unfinished warm state {partial}")
                continue
            try:
                shutil.rmtree(partial)
                report.removed.append(f"unfinished warm state {partial}")
            except OSError as exc:
                report.failed.append(f"unfinished warm state {partial}: {exc}")
        for slot in list_slots(image):
            report.kept.append(f"warm state {slot.folder} ({slot.bytes / 2**20:.0f} MiB; "
                               f"cu-run image warm {image.name} --remove deletes it)")


def folder_owner(folder: Path) -> Owner | None:
    try:
        data = json.loads((folder / EPISODE_OWNER_FILE).read_text())
        return Owner(int(data["owner_pid"]), int(data["owner_start"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no readable owner: a start that died before writing it


def _remove_folder(folder: Path, episodes_dir: Path, report: GcReport, dry_run: bool = False) -> None:
    # Only ever delete inside our own episodes folder, whatever the metadata says.
    if not folder.exists() or folder.resolve().parent != episodes_dir.resolve():
        return
    if dry_run:
        report.removed.append(f"episode folder {folder} (overlay overlay.qcow2)")
        return
    try:
        shutil.rmtree(folder)
        overlay = folder / "overlay.qcow2"
        report.removed.append(f"episode folder {folder} (overlay {overlay.name})")
    except OSError as exc:
        report.failed.append(f"episode folder {folder}: {exc}")
