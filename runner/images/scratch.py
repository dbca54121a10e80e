"""Build in a scratch folder, then rename it into place: nothing half-made is ever in place.

Images, Windows images and warm slots are all made this way, so a build that fails or is
interrupted leaves the old complete thing (or nothing) where a reader looks, never a part.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def remove_tree(path: Path) -> None:
    """Removes PATH whatever it holds; read-only disks (golden, frozen) are made writable first."""
    if not path.exists():
        return
    for disk in path.rglob("*.qcow2"):
        disk.chmod(0o644)
    shutil.rmtree(path, ignore_errors=True)


@contextmanager
def scratch_then_rename(final: Path, scratch: Path,
                        remove: Callable[[Path], None] = remove_tree) -> Iterator[Path]:
    """Yields SCRATCH, made afresh. When the body returns, SCRATCH replaces FINAL; when it
    raises (or is interrupted), SCRATCH is removed and the error goes on."""
    remove(scratch)
    scratch.mkdir(parents=True)
    try:
        yield scratch
    except BaseException:
        remove(scratch)
        raise
    if final.exists():
        remove(final)
    scratch.rename(final)
