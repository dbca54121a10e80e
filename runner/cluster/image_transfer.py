"""Giving a host the driver's image: the image folder in chunks, verified before use.

The driver's catalog decides which image a run uses (by its golden disk's sha256). A host
without that exact disk receives the folder: the manifest, kernel and keys whole, the disk in
chunks. It is assembled in a scratch folder and installed only once its sha256 is the
manifest's, so a torn or corrupt copy is never used and never half-installed. Warm states
stay behind: they belong to the machine that made them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from runner.config import Settings, private_dir
from runner.errors import InfraError
from runner.images.catalog import MANIFEST, Catalog, Image, sha256_file
from runner.vm.warm_state import WARM_DIR

CHUNK_BYTES = 32 << 20
LEFT_BEHIND = {WARM_DIR, "build.log"}  # per machine, or of no use to a host


def image_files(image: Image) -> dict[str, int]:
    """The files a host needs of IMAGE, relative to its folder, with their sizes."""
    files = {}
    for path in sorted(image.folder.rglob("*")):
        rel = path.relative_to(image.folder)
        if path.is_file() and rel.parts[0] not in LEFT_BEHIND:
            files[str(rel)] = path.stat().st_size
    return files


def chunks(image: Image, files: dict[str, int]) -> Iterator[tuple[str, int, bytes]]:
    """(file, offset, data) in order, CHUNK_BYTES at most each; an empty file is one empty chunk."""
    for rel in files:
        with (image.folder / rel).open("rb") as f:
            offset = 0
            while True:
                data = f.read(CHUNK_BYTES)
                if data or offset == 0:
                    yield rel, offset, data
                if len(data) < CHUNK_BYTES:
                    break
                offset += len(data)


class ImageReceiver:
    """The host's side: one scratch folder per image being received, installed on commit."""

    def __init__(self, settings: Settings) -> None:
        self.catalog = Catalog(settings.images_dir)
        self.incoming = settings.cache_dir / "incoming"

    def _scratch(self, name: str) -> Path:
        return self.incoming / f"{name}.{os.getpid()}"

    def begin(self, name: str, files: dict[str, int]) -> None:
        scratch = self._scratch(name)
        shutil.rmtree(scratch, ignore_errors=True)
        private_dir(scratch)
        need = sum(files.values())
        free = shutil.disk_usage(scratch).free
        if free < need + (1 << 30):
            shutil.rmtree(scratch, ignore_errors=True)
            raise InfraError(f"no room for image {name}: it needs {need / 2**30:.1f} GiB, "
                             f"{free / 2**30:.1f} GiB are free at {scratch}",
                             fix="free space on the host, or join it with another --cache-dir")

    def write(self, name: str, rel: str, offset: int, data: bytes) -> None:
        path = (self._scratch(name) / rel).resolve()
        if not path.is_relative_to(self._scratch(name).resolve()):
            raise InfraError(f"image file {rel!r} would land outside the image folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("r+b" if path.exists() else "wb") as f:
            f.seek(offset)
            f.write(data)

    def commit(self, name: str, sha256: str, modes: dict[str, int]) -> Image:
        """Checks the assembled disk against SHA256 and the manifest, then installs the folder
        in place of any older image of that name. A mismatch installs nothing."""
        scratch = self._scratch(name)
        try:
            received = Catalog(self.incoming).find(scratch.name)
            if received is None:
                raise InfraError(f"image {name} arrived without its {MANIFEST}")
            actual = sha256_file(received.disk)
            if actual != sha256 or received.manifest.disk_sha256 != sha256:
                raise InfraError(f"the copy of image {name} has sha256 {actual[:16]}..., the driver's is "
                                 f"{sha256[:16]}...: it was corrupted on the way and is not installed",
                                 fix="run again: the image is sent anew")
            for rel, mode in modes.items():
                (scratch / rel).chmod(mode)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        final = self.catalog.folder(name)
        if final.exists():
            old = self.incoming / f"{name}.old.{os.getpid()}"
            shutil.rmtree(old, ignore_errors=True)
            final.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch.rename(final)
        return self.catalog.get(name)

    def abandon(self, name: str) -> None:
        shutil.rmtree(self._scratch(name), ignore_errors=True)


Progress = Callable[[str], None]


def ship_image(ray, actor, host: str, image: Image, progress: Progress, in_flight: int = 3) -> None:
    """Sends IMAGE to one host's actor, a few chunks in flight, saying how far it got."""
    files = image_files(image)
    total = sum(files.values())
    modes = {rel: (image.folder / rel).stat().st_mode & 0o777 for rel in files}
    ray.get(actor.image_begin.remote(image.name, files))
    pending: list = []
    sent, said = 0, -1
    try:
        for rel, offset, data in chunks(image, files):
            pending.append(actor.image_write.remote(image.name, rel, offset, data))
            sent += len(data)
            if len(pending) >= in_flight:
                ray.get(pending.pop(0))
            percent = sent * 100 // max(total, 1)
            if percent // 25 > said:
                said = percent // 25
                progress(f"{host}: receiving {image.name}: {sent / 2**20:.0f} of {total / 2**20:.0f} MiB")
        ray.get(pending)
        ray.get(actor.image_commit.remote(image.name, image.manifest.disk_sha256, modes))
    except BaseException:
        try:
            actor.image_abandon.remote(image.name)
        except Exception:  # noqa: BLE001 - the host may be the thing that broke
            pass
        raise
    progress(f"{host}: {image.name} received and its sha256 verified")
