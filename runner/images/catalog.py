"""The image catalog: built golden images and their manifests.

Layout under the catalog folder (``<cache>/images`` by default):

    <name>/manifest.json   what the image is and how to reach it
    <name>/disk.qcow2      the golden disk, read-only, never written
    <name>/vmlinuz, initrd.img   for direct kernel boot (linux profile)
    <name>/keys/           the runner's SSH key for this image and the pinned host key
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError, model_validator

from runner.errors import UsageError
from runner.profiles import PROFILES, DesktopUser, GuestProfile, get_profile
from runner.profiles.manifest import ManifestFields

MANIFEST = "manifest.json"


class ImageManifest(ManifestFields):
    """An image's manifest, checked against its guest profile."""

    @model_validator(mode="after")
    def _access_fits_profile(self) -> ImageManifest:
        if self.profile not in PROFILES:
            raise ValueError(f"profile {self.profile!r} is not one of {', '.join(PROFILES)}")
        problem = self.guest.access.access_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @property
    def guest(self) -> GuestProfile:
        return get_profile(self.profile)

    @property
    def desktop_user(self) -> DesktopUser:
        return DesktopUser(self.credentials.user, self.guest.access.home(self.credentials.user))

    def admin_access_missing(self) -> str | None:
        """Why the runner cannot reach the image's admin account, or None: images built before
        the privileged channel have none, and verifying through the desktop user is not sound."""
        return self.guest.access.admin_access_missing(self)

    @property
    def shell_port(self) -> int:
        """The guest port of the runner's shells."""
        return self.guest.access.shell_port(self)


class Image:
    """A catalog entry: its manifest and the folder its files live in."""

    def __init__(self, folder: Path, manifest: ImageManifest) -> None:
        self.folder = folder
        self.manifest = manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def disk(self) -> Path:
        return self.folder / self.manifest.disk

    def path(self, relative: str) -> Path:
        return self.folder / relative

    def verify_disk(self) -> None:
        """Raises UsageError when the golden disk is missing or not what was built."""
        if not self.disk.is_file():
            raise UsageError(
                f"image {self.name}: golden disk {self.disk} is missing",
                fix=f"rebuild it: cu-run image build {self.name} --force",
            )
        actual = sha256_file(self.disk)
        if actual != self.manifest.disk_sha256:
            raise UsageError(
                f"image {self.name}: golden disk {self.disk} has sha256 {actual[:16]}..., "
                f"the manifest says {self.manifest.disk_sha256[:16]}...; it was changed after the build",
                fix=f"rebuild it: cu-run image build {self.name} --force",
            )


class ImageNotBuilt(UsageError):
    """The catalog has no image of that name (runner.images.builders.image_named adds the fix
    that builds it)."""


class Catalog:
    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, name: str) -> Path:
        return self.root / name

    def images(self) -> list[Image]:
        """The images whose manifests this cu-run can read; unreadable() names the others."""
        found = []
        for manifest in self._manifests():
            try:
                found.append(self._load(manifest))
            except UsageError:
                continue
        return found

    def unreadable(self) -> list[UsageError]:
        """Each image folder whose manifest this cu-run cannot read (another version wrote it, or
        it was damaged): the error that reading it gives, with its fix."""
        problems = []
        for manifest in self._manifests():
            try:
                self._load(manifest)
            except UsageError as exc:
                problems.append(exc)
        return problems

    def _manifests(self) -> list[Path]:
        return sorted(self.root.glob(f"*/{MANIFEST}")) if self.root.is_dir() else []

    def find(self, name: str) -> Image | None:
        manifest = self.folder(name) / MANIFEST
        return self._load(manifest) if manifest.is_file() else None

    def get(self, name: str) -> Image:
        image = self.find(name)
        if image is None:
            known = ", ".join(i.name for i in self.images()) or "none"
            raise ImageNotBuilt(f"no image named {name!r} in the catalog at {self.root} (built: {known})",
                                fix="build it with cu-run image build, or use a built image")
        return image

    def _load(self, manifest: Path) -> Image:
        try:
            data = json.loads(manifest.read_text())
            return Image(manifest.parent, ImageManifest.model_validate(data))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise UsageError(
                f"image manifest {manifest} is not valid: {exc}",
                fix=f"rebuild the image: cu-run image build {manifest.parent.name} --force",
            ) from exc


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(4 << 20):
            digest.update(chunk)
    return digest.hexdigest()
