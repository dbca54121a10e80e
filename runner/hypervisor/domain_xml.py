"""Domain XML, built from a spec object (never formatted from strings).

Elements are emitted in a fixed order so the output is stable and golden-file tested;
``cu-run vm up --dry-run`` prints it.
"""

from __future__ import annotations

import re

import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
CU_NS = "https://cu-run.dev/xmlns/episode/1"
DOMAIN_PREFIX = "cu-"
# A fixed PCI slot keeps the guest's NIC name (enp0s30) the same in every clone. On q35
# (the windows profile) 0x1e/0x1f belong to the ICH9 bridges, so the NIC sits at 0x10.
NIC_PCI_SLOT = 0x1E
Q35_NIC_PCI_SLOT = 0x10
Q35_USB_PCI_SLOT = 0x11  # the xHCI controller's, beside the NIC, away from libvirt's automatic ones
# Where the Windows build's QEMU put the boot disk: packer's -drive if=virtio is a virtio-blk-pci on
# the root bus after the VGA (0x1) and packer's NIC (0x2), transitional as a device on a root bus is
# (packer/windows-11/windows-11.pkr.hcl). Windows installed its boot driver for that device there.
Q35_DISK_PCI_SLOT = 0x03
HYPERV_ENLIGHTENMENTS = ("relaxed", "vapic", "spinlocks")
# Only KVM implements these: under TCG QEMU refuses to start ("kernel doesn't allow setting HyperV VP_INDEX").
KVM_HYPERV_ENLIGHTENMENTS = ("vpindex", "synic", "stimer")

Accel = Literal["kvm", "tcg"]

ET.register_namespace("qemu", QEMU_NS)
ET.register_namespace("cu", CU_NS)


@dataclass(frozen=True)
class SlotIdentity:
    """Name, UUID and MAC of one pool slot, the same every time the slot is used.

    Warm restore needs this: libvirt restores a saved RAM state only into a domain
    with the name and UUID it was saved under.
    """

    pool: str
    slot: int

    @property
    def name(self) -> str:
        return f"{DOMAIN_PREFIX}{self.pool}-{self.slot}"

    @property
    def uuid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cu-run:{self.pool}:{self.slot}"))

    @property
    def mac(self) -> str:
        tail = uuid.UUID(self.uuid).bytes[-3:]
        return "52:54:00:" + ":".join(f"{b:02x}" for b in tail)


@dataclass(frozen=True)
class PortForward:
    """A guest TCP port reachable from the host at 127.0.0.1:host_port, and nothing else."""

    host_port: int
    guest_port: int


@dataclass(frozen=True)
class DirectKernel:
    kernel: Path
    initrd: Path
    cmdline: str


@dataclass(frozen=True)
class Uefi:
    """OVMF firmware: read-only code, and this domain's own copy of the variable store."""

    code: Path
    nvram: Path


@dataclass(frozen=True)
class EpisodeTag:
    """What gc needs to find a domain's owner and leftovers: stored in libvirt metadata."""

    run_id: str
    slot: int
    owner_pid: int
    owner_start: int  # the owner's start time in clock ticks since boot, so a reused pid is not mistaken
    workdir: Path


@dataclass(frozen=True)
class DomainSpec:
    identity: SlotIdentity
    accel: Accel
    disk: Path
    serial_log: Path
    tag: EpisodeTag
    boot: DirectKernel | None = None
    # With it: q35, UEFI and the Windows devices (USB tablet, Hyper-V enlightenments), and the disk
    # and CPU topology the Windows build had (the disk at Q35_DISK_PCI_SLOT, one socket).
    firmware: Uefi | None = None
    forwards: tuple[PortForward, ...] = ()
    memory_mib: int = 1024
    vcpus: int = 1
    emulator: str = "/usr/bin/qemu-system-x86_64"
    tb_cache_mib: int = 256
    # Run QEMU as this uid:gid without relabelling files, so a caller's cache folder
    # works under qemu:///system the way it would under qemu:///session.
    run_as: tuple[int, int] | None = None
    # VNC's own authentication (8 characters at most): nobody but the run drives the episode.
    vnc_password: str | None = None
    # A virtio-serial port for the QEMU guest agent: for images whose guest runs it.
    agent_channel: bool = False


def redacted(domain_xml: str) -> str:
    """DOMAIN_XML fit to keep in a run folder: the VNC password blanked out."""
    return re.sub(r"""passwd=(['"])[^'"]*\1""", "passwd='(per-episode, not kept)'", domain_xml)


def build_domain_xml(spec: DomainSpec) -> str:
    dom = ET.Element("domain", {"type": "kvm" if spec.accel == "kvm" else "qemu"})
    _text(dom, "name", spec.identity.name)
    _text(dom, "uuid", spec.identity.uuid)
    _metadata(ET.SubElement(dom, "metadata"), spec.tag)
    _text(dom, "memory", str(spec.memory_mib), unit="MiB")
    _text(dom, "vcpu", str(spec.vcpus))
    _os(ET.SubElement(dom, "os"), spec)
    features = ET.SubElement(dom, "features")
    ET.SubElement(features, "acpi")
    if spec.firmware is not None:
        ET.SubElement(features, "apic")
        # Windows runs markedly faster, and idles far cheaper, when it knows it is on a hypervisor:
        # the enlightenments libvirt's own Windows guidance turns on (stimer needs synic, which
        # needs vpindex), with the Hyper-V clock below and HPET off, as far as the accelerator has them.
        hyperv = ET.SubElement(features, "hyperv", {"mode": "custom"})
        for name in HYPERV_ENLIGHTENMENTS + (KVM_HYPERV_ENLIGHTENMENTS if spec.accel == "kvm" else ()):
            ET.SubElement(hyperv, name, {"state": "on", **({"retries": "8191"} if name == "spinlocks" else {})})
    if spec.accel == "tcg":
        # Halves QEMU's RSS per VM under TCG (1.4 GB -> ~0.65 GB for a 1 GiB guest).
        tcg = ET.SubElement(features, "tcg")
        _text(tcg, "tb-cache", str(spec.tb_cache_mib), unit="MiB")
    _cpu(dom, spec)
    clock = ET.SubElement(dom, "clock", {"offset": "utc"})
    if spec.firmware is not None:
        if spec.accel == "kvm":
            ET.SubElement(clock, "timer", {"name": "hypervclock", "present": "yes"})
        ET.SubElement(clock, "timer", {"name": "hpet", "present": "no"})
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        _text(dom, event, "destroy")
    _devices(ET.SubElement(dom, "devices"), spec)
    if spec.run_as is not None:
        seclabel = ET.SubElement(dom, "seclabel", {"type": "static", "model": "dac", "relabel": "no"})
        _text(seclabel, "label", f"+{spec.run_as[0]}:+{spec.run_as[1]}")
    _network(ET.SubElement(dom, f"{{{QEMU_NS}}}commandline"), spec)
    ET.indent(dom, space="  ")
    return ET.tostring(dom, encoding="unicode") + "\n"


def _text(parent: ET.Element, tag: str, text: str, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attrs)
    element.text = text
    return element


def _metadata(metadata: ET.Element, tag: EpisodeTag) -> None:
    episode = ET.SubElement(metadata, f"{{{CU_NS}}}episode")
    _text(episode, f"{{{CU_NS}}}run", tag.run_id)
    _text(episode, f"{{{CU_NS}}}slot", str(tag.slot))
    _text(episode, f"{{{CU_NS}}}owner-pid", str(tag.owner_pid))
    _text(episode, f"{{{CU_NS}}}owner-start", str(tag.owner_start))
    _text(episode, f"{{{CU_NS}}}workdir", str(tag.workdir))


def parse_episode_tag(metadata_xml: str) -> EpisodeTag:
    """Reads back the <cu:episode> element libvirt returns for our namespace."""
    root = ET.fromstring(metadata_xml)

    # Match on local names: libvirt may hand the element back under another prefix.
    def field_text(name: str) -> str:
        for child in root:
            if child.tag.split("}")[-1] == name:
                return child.text or ""
        raise ValueError(f"episode metadata has no {name}")

    return EpisodeTag(
        run_id=field_text("run"),
        slot=int(field_text("slot")),
        owner_pid=int(field_text("owner-pid")),
        owner_start=int(field_text("owner-start")),
        workdir=Path(field_text("workdir")),
    )


def _os(os_el: ET.Element, spec: DomainSpec) -> None:
    _text(os_el, "type", "hvm", arch="x86_64", machine="q35" if spec.firmware else "pc")
    if spec.firmware is not None:
        _text(os_el, "loader", str(spec.firmware.code), readonly="yes", type="pflash")
        _text(os_el, "nvram", str(spec.firmware.nvram))
        ET.SubElement(os_el, "boot", {"dev": "hd"})
    elif spec.boot is not None:
        _text(os_el, "kernel", str(spec.boot.kernel))
        _text(os_el, "initrd", str(spec.boot.initrd))
        _text(os_el, "cmdline", spec.boot.cmdline)
    else:
        ET.SubElement(os_el, "boot", {"dev": "hd"})


def _cpu(dom: ET.Element, spec: DomainSpec) -> None:
    if spec.accel == "kvm":
        cpu = ET.SubElement(dom, "cpu", {"mode": "host-passthrough"})
    elif spec.firmware is not None:
        # Windows 11 24H2 needs x86-64-v2 (POPCNT, SSE4.2): TCG's default qemu64 lacks it.
        cpu = ET.SubElement(dom, "cpu", {"mode": "maximum", "check": "none"})
    else:
        return
    if spec.firmware is not None:
        # The Windows build's topology (its -smp): one socket of VCPUS cores. libvirt's default is a
        # socket per vCPU, and Windows client editions use one socket (Home) or two (Pro).
        ET.SubElement(cpu, "topology", {"sockets": "1", "cores": str(spec.vcpus), "threads": "1"})


def _devices(devices: ET.Element, spec: DomainSpec) -> None:
    _text(devices, "emulator", spec.emulator)
    # Windows binds its boot driver to the disk device it was installed on. Left to libvirt, the disk
    # would sit behind a pcie-root-port, modern-only (1af4:1042): a device every cold clone's first
    # boot would meet as new. So it is the build's device at the build's address: transitional
    # (1af4:1001) on the root bus at Q35_DISK_PCI_SLOT.
    disk = ET.SubElement(devices, "disk", {"type": "file", "device": "disk",
                                           **({"model": "virtio-transitional"} if spec.firmware else {})})
    # The overlay is thrown away after the episode: no reason to pay for flushes.
    ET.SubElement(disk, "driver", {"name": "qemu", "type": "qcow2", "cache": "unsafe", "discard": "unmap"})
    ET.SubElement(disk, "source", {"file": str(spec.disk)})
    ET.SubElement(disk, "target", {"dev": "vda", "bus": "virtio"})
    if spec.firmware is not None:
        ET.SubElement(disk, "address", _root_bus_address(Q35_DISK_PCI_SLOT))
    serial = ET.SubElement(devices, "serial", {"type": "file"})
    ET.SubElement(serial, "source", {"path": str(spec.serial_log)})
    ET.SubElement(serial, "target", {"port": "0"})
    if spec.firmware is not None:
        # Windows has no inbox virtio-input driver; its USB HID driver takes a USB tablet. The
        # controller and the tablet's port are pinned: libvirt refuses to restore a saved state
        # into XML whose USB device has no address ("Target device address type none does not
        # match source usb"), and a fixed address keeps the device the same in every clone.
        controller = ET.SubElement(devices, "controller", {"type": "usb", "index": "0", "model": "qemu-xhci"})
        ET.SubElement(controller, "address", _root_bus_address(Q35_USB_PCI_SLOT))
        tablet = ET.SubElement(devices, "input", {"type": "tablet", "bus": "usb"})
        ET.SubElement(tablet, "address", {"type": "usb", "bus": "0", "port": "1"})
    else:
        ET.SubElement(devices, "input", {"type": "tablet", "bus": "virtio"})
    ET.SubElement(devices, "input", {"type": "keyboard", "bus": "ps2"})
    graphics = ET.SubElement(devices, "graphics", {"type": "vnc", "port": "-1", "autoport": "yes", "listen": "127.0.0.1",
                                                   **({"passwd": spec.vnc_password} if spec.vnc_password else {})})
    ET.SubElement(graphics, "listen", {"type": "address", "address": "127.0.0.1"})
    video = ET.SubElement(devices, "video")
    ET.SubElement(video, "model", {"type": "vga", "vram": "16384", "heads": "1", "primary": "yes"})
    ET.SubElement(devices, "memballoon", {"model": "none"})
    if spec.agent_channel:
        # The socket beside the serial log, in the caller's own folder, so a QEMU run as the
        # caller can make it; libvirt's folder when that path is too long for a socket.
        socket = spec.serial_log.parent / "agent.sock"
        channel = ET.SubElement(devices, "channel", {"type": "unix"})
        ET.SubElement(channel, "source", {"mode": "bind", **({"path": str(socket)} if len(str(socket)) < 100 else {})})
        ET.SubElement(channel, "target", {"type": "virtio", "name": "org.qemu.guest_agent.0"})


def _root_bus_address(slot: int) -> dict[str, str]:
    return {"type": "pci", "domain": "0x0000", "bus": "0x00", "slot": f"{slot:#04x}", "function": "0x0"}


NETDEV_ID = "cunet"  # the user-mode network's id, which the monitor's hostfwd_add names


def _network(commandline: ET.Element, spec: DomainSpec) -> None:
    # libvirt's <interface type='user'> cannot say restrict=on, so the user-mode
    # network is given to QEMU directly: no route out, only the forwards below.
    forwards = "".join(f",hostfwd=tcp:127.0.0.1:{f.host_port}-:{f.guest_port}" for f in spec.forwards)
    args = [
        "-netdev",
        f"user,id={NETDEV_ID},restrict=on{forwards}",
        "-device",
        f"virtio-net-pci,netdev={NETDEV_ID},mac={spec.identity.mac},"
        + (f"bus=pcie.0,addr={Q35_NIC_PCI_SLOT:#x}" if spec.firmware else f"bus=pci.0,addr={NIC_PCI_SLOT:#x}"),
    ]
    for arg in args:
        ET.SubElement(commandline, f"{{{QEMU_NS}}}arg", {"value": arg})
