"""The windows profile's domain, run as far as a host without Windows goes: started through
LibvirtHost from a stand-in EFI disk (GRUB, made by grub-mkrescue from Debian's packages),
its screen read, saved, and restored with a new WinRM port forward, as a warm slot would be.

A restore of the USB tablet without a pinned address was refused by libvirt ("Target device
address type none does not match source usb"): this test is what would have caught it.
About 15 s under TCG: it runs in the default tier."""

import socket
import subprocess
import time
from pathlib import Path

from runner.vm.domain import EPISODE_NVRAM_FILE, run_as_for
from runner.hypervisor.domain_xml import DomainSpec, EpisodeTag, PortForward, SlotIdentity, Uefi
from runner.images.windows_11 import OVMF_CANDIDATES
from runner.network.carriers import GUEST_CARRIER_PORT
from runner.owner import me
from runner.runs.scope import resolve_accel
from runner.screen import is_blank, png_size

GRUB_CFG = """set timeout=-1
menuentry "cu-run stand-in EFI disk" { halt }
"""


def stand_in_efi_disk(folder: Path) -> Path:
    """A disk OVMF boots from: grub-mkrescue's hybrid image (an EFI system partition inside),
    as a qcow2 like a golden image's overlay."""
    tree = folder / "tree" / "boot" / "grub"
    tree.mkdir(parents=True)
    (tree / "grub.cfg").write_text(GRUB_CFG)
    raw = folder / "standin.img"
    subprocess.run(["grub-mkrescue", "-o", str(raw), str(folder / "tree")], check=True, capture_output=True)
    disk = folder / "overlay.qcow2"
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(raw), str(disk)], check=True, capture_output=True)
    return disk


def windows_shaped(workdir: Path, ovmf_code: str, port: int, accel: str, run_as) -> DomainSpec:
    owner = me()
    return DomainSpec(
        identity=SlotIdentity(f"winlife{owner.pid}", 0), accel=accel, disk=workdir / "overlay.qcow2",
        serial_log=workdir / "serial.log", tag=EpisodeTag("winlife", 0, owner.pid, owner.start, workdir),
        firmware=Uefi(Path(ovmf_code), workdir / EPISODE_NVRAM_FILE), forwards=(PortForward(port, 5985),),
        memory_mib=512, vcpus=2, run_as=run_as)


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def screen_size_settled(host, name: str, timeout: float = 120.0) -> tuple[int, int]:
    """The screen's size once the firmware's menu is drawn: early on QEMU's VGA shows its
    640x480 text mode, then OVMF's graphics mode takes over; the size is read when the
    screen is drawn and the same on two captures a second apart."""
    deadline = time.monotonic() + timeout
    previous = b""
    while True:
        _mime, png = host.screenshot(name)
        if png == previous and not is_blank(png) and png_size(png) != (640, 480):
            return png_size(png)
        previous = png
        if time.monotonic() > deadline:
            return png_size(png)
        time.sleep(1)


def test_a_windows_shaped_domain_starts_saves_and_restores_with_a_new_port_forward(host, settings):
    accel, _probe = resolve_accel(settings, "auto")
    run_as = run_as_for(settings.libvirt_uri)
    ovmf_code, ovmf_vars = next((c, v) for c, v in OVMF_CANDIDATES if Path(c).is_file())
    workdir = settings.episodes_dir / f"winlife-{me().pid}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        stand_in_efi_disk(workdir)
        (workdir / EPISODE_NVRAM_FILE).write_bytes(Path(ovmf_vars).read_bytes())
        first, second = host.free_port(), host.free_port()
        spec = windows_shaped(workdir, ovmf_code, first, accel, run_as)
        name = f"cu-winlife{me().pid}-0"
        host.start(spec)
        try:
            # OVMF's own GOP mode on Debian's build: the screen the image manifest records (1280x800).
            assert screen_size_settled(host, name) == (1280, 800)
            assert listening(first)
            host.save(name, workdir / "ram.state")
            assert not host.is_running(name)
            host.restore(workdir / "ram.state", windows_shaped(workdir, ovmf_code, second, accel, run_as))
            assert host.is_running(name)
            assert listening(second) and not listening(first)
            assert png_size(host.screenshot(name)[1]) == (1280, 800)
            # A networked episode's carriers (runner.runs.episode_network): their forward added to
            # the running domain through QEMU's monitor, as on Linux guests.
            carriers = host.free_port()
            host.add_forward(name, carriers, GUEST_CARRIER_PORT)
            assert listening(carriers)
        finally:
            host.destroy(name)
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
