"""A host for episode VMs without QEMU: libvirt's own test:///default driver for the domains,
FakeDisplay for the screen it cannot have, and an image whose disk is an empty qcow2. The guest
behind it is whatever profile the test registers (its shells LocalShell on this host)."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from fakes.display import FakeDisplay
from runner.hypervisor.libvirt_host import LibvirtHost
from runner.images.catalog import Image, ImageManifest
from runner.profiles.manifest import Credentials, ScreenSize, SshAccess
from typing_extensions import override

DESKTOP = "#1f6f8b"  # FakeDisplay's background: the desktop is "up" at once


class TestDriverHost(LibvirtHost):
    """libvirt's test driver for the domains; a FakeDisplay for the screen it cannot have."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__("test:///default")
        self.displays: list[FakeDisplay] = []

    @override
    def vnc_endpoint(self, name):
        return "127.0.0.1", 5999

    @override
    def open_display(self, name, *, password, pointer_offset=0, fast_capture=True):
        self.displays.append(FakeDisplay(1280, 800))
        return self.displays[-1]



def image_of(tmp_path: Path, profile: str) -> Image:
    folder = tmp_path / "images" / "fake"
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(folder / "disk.qcow2"), "64M"], check=True)
    manifest = ImageManifest(
        name="fake", profile=profile, disk="disk.qcow2", disk_sha256="0" * 64, disk_bytes=1,
        screen=ScreenSize(width=1280, height=800), desktop_color=DESKTOP,
        credentials=Credentials(user="alice", password="x"),
        ssh=SshAccess(user="alice", private_key="keys/client", host_key="ssh-ed25519 AAAA", admin_private_key="keys/a"),
        built_at=datetime.now(UTC), build_seconds=0, builder="test")
    return Image(folder, manifest)
