"""Copy-on-write overlays on a golden disk (qemu-img)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from runner.errors import InfraError


def create_overlay(backing: Path, overlay: Path) -> Path:
    """Creates OVERLAY, a qcow2 whose reads fall through to BACKING and whose writes stay in it.

    BACKING is recorded by absolute path and is only ever opened read-only through it.
    """
    overlay.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(backing.resolve()), str(overlay)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise InfraError(f"qemu-img could not create overlay {overlay} on {backing}: {result.stderr.strip()}")
    return overlay


def backing_file(image: Path) -> Path | None:
    """The backing file IMAGE names, or None for a standalone image."""
    result = subprocess.run(
        ["qemu-img", "info", "-U", "--output=json", str(image)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise InfraError(f"qemu-img could not read {image}: {result.stderr.strip()}")
    info = json.loads(result.stdout)
    backing = info.get("full-backing-filename") or info.get("backing-filename")
    return Path(backing) if backing else None
