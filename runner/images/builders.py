"""The images cu-run builds, one module each that registers its builder: `cu-run image build NAME`.

runner.images.linux_images registers linux-test and linux-desktop (a Debian recipe each),
runner.images.windows_11 registers windows-11 (Packer, from a lab's own media). A builder gets
a BuildRequest: the catalog to build into, whether to rebuild, the accelerator (resolved only
if it asks), its own options from the command line (windows-11's media), and a progress line.
A new image builder is one module that registers itself, added to BUILT_IN.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.errors import UsageError
from runner.images.catalog import Catalog, Image, ImageNotBuilt
from runner.registry import Registry

BUILT_IN = ("runner.images.linux_images", "runner.images.windows_11")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildRequest:
    catalog: Catalog
    force: bool = False  # rebuild though the catalog has it
    accel: Callable[[], str] = lambda: "tcg"  # the accelerator to build under, resolved when asked
    options: Mapping[str, Any] = field(default_factory=dict)  # the builder's own (windows-11: its media)
    progress: Progress = print
    status: Callable[[str], None] = lambda _line: None  # a passing line (what the build does now)


@dataclass(frozen=True)
class Builder:
    name: str
    build: Callable[[BuildRequest], tuple[Image, bool]]  # the image, and whether it was built now
    about: str  # one line: what it builds from


BUILDERS: Registry[Builder] = Registry(
    "image builder", BUILT_IN, lambda builder: builder.name,
    lambda name, known: UsageError(f"{name!r} is not an image cu-run builds: {', '.join(known)}"))
register_builder = BUILDERS.register
unregister_builder = BUILDERS.unregister
builder_names = BUILDERS.names
get_builder = BUILDERS.get


def image_named(catalog: Catalog, name: str) -> Image:
    """CATALOG's image NAME, or a UsageError whose fix builds it when cu-run can, and otherwise
    names the images cu-run builds."""
    try:
        return catalog.get(name)
    except ImageNotBuilt as missing:
        fix = (f"build it: cu-run image build {name}" if name in builder_names() else
               f"use a built image, or build one of: {', '.join(builder_names())} (cu-run image build NAME)")
        raise UsageError(missing.message, fix=fix) from None
