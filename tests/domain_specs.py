"""Domain specs shared by the domain XML tests (golden files) and the e2e check that libvirt accepts them,
and what QEMU makes of a command line's boot disk and CPUs (the Windows build's against an episode's)."""

import json
import shlex
import subprocess
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import libvirt

from runner.hypervisor.domain_xml import (
    DirectKernel,
    DomainSpec,
    EpisodeTag,
    PortForward,
    SlotIdentity,
    Uefi,
    build_domain_xml,
)
from runner.owner import me
from runner.images.catalog import Image, ImageManifest
from runner.profiles.manifest import Credentials, ScreenSize, UefiFirmware, WinRmAccess
from runner.vm.domain import episode_domain_spec


def spec(**overrides) -> DomainSpec:
    base = dict(
        identity=SlotIdentity("r1a2b3", 0),
        accel="tcg",
        disk=Path("/cache/episodes/cu-r1a2b3-0/overlay.qcow2"),
        serial_log=Path("/cache/episodes/cu-r1a2b3-0/serial.log"),
        tag=EpisodeTag("r1a2b3", 0, 4242, 987654, Path("/cache/episodes/cu-r1a2b3-0")),
        boot=DirectKernel(Path("/cache/images/linux-test/vmlinuz"), Path("/cache/images/linux-test/initrd.img"),
                          "root=/dev/vda rw console=ttyS0,115200"),
        forwards=(PortForward(40022, 22),),
        run_as=(0, 0),
    )
    base.update(overrides)
    return DomainSpec(**base)



def windows_spec(**overrides) -> DomainSpec:
    workdir = Path("/cache/episodes/cu-r1a2b3-0")
    return spec(boot=None, firmware=Uefi(Path("/usr/share/OVMF/OVMF_CODE_4M.fd"), workdir / "OVMF_VARS.fd"),
                forwards=(PortForward(45985, 5985),), memory_mib=4096, vcpus=2, **overrides)


@dataclass(frozen=True)
class QemuDisk:
    """A virtio disk as QEMU made it: its device type, the bus it sits on, its disable-legacy as
    realized (None where the type fixes it), and query-pci's record of it: slot, function, PCI ids,
    class and BARs, which is what the guest sees (None behind a bridge, whose bus has no number
    before the firmware gives it one)."""

    driver: str
    parent_bus: str
    disable_legacy: str | None
    pci: dict[str, Any] | None


@dataclass(frozen=True)
class QemuMachine:
    disk: QemuDisk
    cpus: list[dict[str, int]]  # each CPU's socket-id, core-id and thread-id


def qemu_machine(args: list[str], disk: Path) -> QemuMachine:
    """What QEMU makes of ARGS (a command line without the binary): the device of DISK's drive and
    the CPUs, asked over QMP of a machine held before its first instruction (-S): nothing boots."""
    qemu = subprocess.Popen(["qemu-system-x86_64", "-S", "-display", "none", "-qmp", "stdio", *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, qemu.kill)
    watchdog.start()

    def ask(command: str, **arguments: object) -> Any:
        assert qemu.stdin is not None and qemu.stdout is not None
        qemu.stdin.write(json.dumps({"execute": command, **({"arguments": arguments} if arguments else {})}) + "\n")
        qemu.stdin.flush()
        while line := qemu.stdout.readline():
            answer = json.loads(line)
            if "error" in answer:
                return None
            if "return" in answer:
                return answer["return"]
        raise AssertionError(f"QEMU ended: {qemu.stderr.read() if qemu.stderr else ''}")

    try:
        assert qemu.stdout is not None and qemu.stdout.readline(), "QEMU gave no QMP greeting"
        ask("qmp_capabilities")
        (block,) = [b for b in ask("query-block") if b.get("inserted", {}).get("file") == str(disk)]
        device = block["qdev"].removesuffix("/virtio-backend")
        pci = [dict((k, v) for k, v in d.items() if k != "qdev_id") for bus in ask("query-pci")
               for d in _pci_devices(bus["devices"]) if d["id"]["vendor"] == 0x1AF4 and d["class_info"]["class"] == 0x0100]
        assert len(pci) <= 1, f"more than one virtio disk: {pci}"
        cpus = sorted((c["props"] for c in ask("query-hotpluggable-cpus")),
                      key=lambda c: (c["socket-id"], c["core-id"], c["thread-id"]))
        return QemuMachine(QemuDisk(ask("qom-get", path=device, property="type"),
                                    ask("qom-get", path=device, property="parent_bus"),
                                    ask("qom-get", path=device, property="disable-legacy"),
                                    pci[0] if pci else None), cpus)
    finally:
        watchdog.cancel()
        qemu.kill()
        qemu.wait()


def _pci_devices(devices: list[dict]) -> list[dict]:
    found = []
    for device in devices:
        found.append(device)
        found += _pci_devices(device.get("pci_bridge", {}).get("devices", []))
    return found


def native_args(libvirt_uri: str, domain_xml: str) -> list[str]:
    """The QEMU command line libvirt makes of DOMAIN_XML (virsh domxml-to-native qemu-argv), without
    the environment and the binary."""
    conn = libvirt.open(libvirt_uri)
    try:
        words = shlex.split(conn.domainXMLToNative("qemu-argv", domain_xml, 0))
    finally:
        conn.close()
    return words[next(i for i, w in enumerate(words) if w.startswith("/")) + 1:]


def option(args: list[str], flag: str) -> list[str]:
    """Every value ARGS gives FLAG, in order."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def episode_disk_and_cpu_args(native: list[str]) -> list[str]:
    """From libvirt's command line: the machine type, the accelerator, -smp, and the boot disk's
    -blockdev nodes and -device (virtio-disk0) with the ports it sits behind: enough for QEMU to
    make the same disk and CPUs."""
    devices = [json.loads(d) for d in option(native, "-device") if d.startswith("{")]
    (disk,) = [d for d in devices if d.get("id") == "virtio-disk0"]
    ports = {d["id"]: d for d in devices if "id" in d}
    chain = [disk]
    while chain[0].get("bus") in ports:
        chain.insert(0, ports[chain[0]["bus"]])
    nodes = {json.loads(b)["node-name"]: b for b in option(native, "-blockdev")}
    fmt = json.loads(nodes[disk["drive"]])
    (machine,) = option(native, "-machine")
    (accel,) = option(native, "-accel")
    (topology,) = option(native, "-smp")
    return [*(["-nodefaults"] if "-nodefaults" in native else []),
            "-machine", machine.split(",")[0], "-accel", accel.split(",")[0], "-smp", topology,
            "-blockdev", nodes[fmt["file"]], "-blockdev", nodes[disk["drive"]],
            *(word for device in chain for word in ("-device", json.dumps(device)))]


def smp(value: str) -> dict[str, int]:
    """-smp's topology as written: cpus (the bare number or cpus=), sockets, cores and threads."""
    parts = [p.split("=", 1) if "=" in p else ["cpus", p] for p in value.split(",")]
    return {k: int(v) for k, v in parts if k in ("cpus", "sockets", "cores", "threads")}


def windows_episode_xml(folder: Path, ovmf_code: str, vcpus: int, memory_mib: int, libvirt_uri: str) -> tuple[str, Path]:
    """The domain XML cu-run builds for an episode of a Windows image built with VCPUS and
    MEMORY_MIB (what the build records in the manifest), and its overlay, made empty in FOLDER."""
    (folder / "windows-11").mkdir(parents=True)
    manifest = ImageManifest(
        name="windows-11", profile="windows", disk="disk.qcow2", disk_sha256="0" * 64, disk_bytes=1,
        firmware=UefiFirmware(code=ovmf_code, vars="OVMF_VARS.fd"), screen=ScreenSize(width=1280, height=800),
        credentials=Credentials(user="cu", password="pw"), winrm=WinRmAccess(user="cu", password="pw"),
        memory_mib=memory_mib, vcpus=vcpus, built_at=datetime(2026, 1, 1, tzinfo=UTC), build_seconds=1.0,
        builder="test")
    (folder / "episode").mkdir()
    domain = episode_domain_spec(Image(folder / "windows-11", manifest), SlotIdentity("diskid", 0),
                                 folder / "episode", "tcg", 45985, me(), libvirt_uri)
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(domain.disk), "1G"], check=True, capture_output=True)
    return build_domain_xml(domain), domain.disk
