"""Fixtures that boot real VMs: libvirt, QEMU (TCG here), VNC and SSH, nothing faked."""

import pytest

from runner.catalog import Catalog, Image
from runner.hypervisor.libvirt_host import LibvirtHost
from runner.imagebuild import LINUX_TEST, build_image
from runner.session import resolve_accel


@pytest.fixture(scope="session")
def linux_image(settings) -> Image:
    """The linux-test image, built by the project's own recipe if the cache lacks it."""
    image, _built = build_image(Catalog(settings.images_dir), LINUX_TEST, progress=lambda _line: None)
    return image


@pytest.fixture(scope="session")
def accel(settings, linux_image) -> str:
    chosen, _probe = resolve_accel(settings, linux_image, "auto")
    return chosen


@pytest.fixture(scope="session")
def host(settings):
    h = LibvirtHost(settings.libvirt_uri)
    yield h
    h.close()
