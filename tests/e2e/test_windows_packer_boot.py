"""The real Packer template, booted under TCG with a stand-in EFI ISO, as far as a host with no
Windows media goes: Debian's packer runs windows-11.pkr.hcl with the variables cu-run passes.

The stand-in (grub-mkrescue, from Debian's packages) plays Windows' "Press any key to boot from
CD or DVD": it waits for a key, and turns its screen green once one arrives. The test checks:
- QEMU's arguments: the build VM's network is QEMU user mode with restrict=on and only the
  WinRM forward on 127.0.0.1, and packer still gives it its NIC;
- the setup CD's layout: the answer file and enable-winrm.ps1 at its root, the drivers in
  $WinPEDriver$ (Joliet keeps the name), and each of the answer file's DriverPaths there but for
  its drive letter;
- the boot disk and CPUs: packer's own command line, run again paused and asked over QMP, makes
  the disk device (type, bus, slot, PCI ids) and CPU topology that libvirt makes of the episode
  domain cu-run builds for the image (domxml-to-native), and -smp says the same on both;
- OVMF's boot order and the boot keys: the CD booted, and packer's keys reached it (green);
- the configured WinRM wait: packer gives up after it and says what it waited for, leaving
  no QEMU behind;
- BuildWatch on the real output and screen: the phases named with their times, and the build
  VM's screen captured on the VNC port cu-run chose.
About 1.5 minutes (most of it the WinRM wait): the full tier."""

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path, PureWindowsPath

import pytest

from domain_specs import episode_disk_and_cpu_args, native_args, option, qemu_machine, smp, windows_episode_xml
from runner.hypervisor.domain_xml import Q35_DISK_PCI_SLOT
from runner.images.windows_11 import DRIVERS_FOLDER, TEMPLATE_DIR, WindowsInputs, packer_argv, packer_vars, \
    write_autounattend
from runner.display.vnc import VncDisplay
from runner.images.windows_build_watch import BuildWatch
from runner.sockets import free_port
from runner.screen import color_fraction

pytestmark = pytest.mark.full

GRUB_CFG = """insmod all_video
insmod gfxterm
loadfont unicode
terminal_output gfxterm
background_color 0,0,0
clear
echo "Press any key to boot from CD or DVD"
read key
background_color 0,160,0
clear
echo "keys arrived"
sleep 3600
"""
GREEN = "#00a000"
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
U = "{urn:schemas-microsoft-com:unattend}"


def stand_in_windows_iso(folder: Path) -> Path:
    tree = folder / "iso" / "boot" / "grub"
    tree.mkdir(parents=True)
    (tree / "grub.cfg").write_text(GRUB_CFG)
    iso = folder / "standin.iso"
    subprocess.run(["grub-mkrescue", "-o", str(iso), str(folder / "iso")], check=True, capture_output=True)
    return iso


def wait_for_line(log: Path, pattern: str, process: subprocess.Popen, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = re.search(pattern, log.read_text(errors="replace"))
        if match:
            return match
        assert process.poll() is None, f"packer ended early:\n{log.read_text()[-3000:]}"
        time.sleep(0.5)
    raise AssertionError(f"no {pattern!r} in packer's log within {timeout:.0f} s")


def driver_paths_on_the_cd(answer_file: Path) -> list[str]:
    """The answer file's DriverPaths as paths on the CD, as xorriso lists them."""
    items = ET.parse(answer_file).getroot().iter(f"{U}PathAndCredentials")
    paths = [PureWindowsPath(item.findtext(f"{U}Path") or "") for item in items]
    assert paths
    return [f"'/{p.relative_to(p.anchor).as_posix()}'" for p in paths]


def rerun_paused(args: list[str], disk: Path, tmp_path: Path) -> list[str]:
    """Packer's QEMU command line, to run again once packer is done: no display, an empty disk in
    place of packer's (it removes its output when a build fails) and stand-ins for the CDs (it
    removes the one it made)."""
    out, skip = [], False
    for i, word in enumerate(args):
        if skip or word == "-vnc":
            skip = not skip
            continue
        if i and args[i - 1] == "-drive":
            stand_in = tmp_path / f"cd{i}.iso"
            stand_in.write_bytes(b"\0" * 2048)
            word = re.sub(r"^file=[^,]*", f"file={stand_in if 'media=cdrom' in word else disk}", word)
        out.append(word)
    return out


def test_packer_boots_the_template_from_a_stand_in_iso_and_its_keys_arrive(tmp_path, settings):
    iso = stand_in_windows_iso(tmp_path)
    work = tmp_path / "work"
    (work / DRIVERS_FOLDER / "viostor").mkdir(parents=True)
    (work / DRIVERS_FOLDER / "viostor" / "viostor.inf").write_text("[Version]\n")
    write_autounattend(work / "autounattend.xml", "pw")
    shutil.copy("/usr/share/OVMF/OVMF_VARS_4M.fd", work / "OVMF_VARS.fd")
    installer = tmp_path / "python-3.13.1-amd64.exe"
    installer.write_bytes(b"stand-in")
    inputs = WindowsInputs(iso=iso, virtio_iso=iso, python_installer=installer, accel="tcg", winrm_timeout="1m",
                           memory_mib=512, cpus=2, disk_size="1G")
    winrm_port = free_port()
    variables = packer_vars(inputs, work, "/usr/share/OVMF/OVMF_CODE_4M.fd", "pw",
                            hashlib.sha256(iso.read_bytes()).hexdigest(), "vpw", winrm_port)
    shown: list[str] = []
    watch = BuildWatch(work, shown.append, open_screen=lambda port: VncDisplay("127.0.0.1", port),
                       fetch_panther=lambda dest: None, screen_every=2.0)
    log = tmp_path / "packer.log"
    env = dict(os.environ, PACKER_LOG="1", CHECKPOINT_DISABLE="1", PACKER_NO_COLOR="1",
               PACKER_CACHE_DIR=str(tmp_path / "cache"))
    with log.open("w") as out:
        # A session of its own: a failed assertion kills packer and the QEMU it started together
        # (killed alone, packer leaves its QEMU running).
        packer = subprocess.Popen(packer_argv("packer", "build", variables), stdout=out, stderr=subprocess.STDOUT,
                                  cwd=TEMPLATE_DIR, env=env, start_new_session=True)
    try:
        command = wait_for_line(log, r"Executing /usr/bin/qemu-system-x86_64: \[\]string\{(.*)\}", packer, 120)
        args = json.loads("[" + command.group(1) + "]")
        netdev = args[args.index("-netdev") + 1]
        assert netdev == f"user,id=user.0,restrict=on,hostfwd=tcp:127.0.0.1:{winrm_port}-:5985"
        assert "virtio-net,netdev=user.0" in args
        cds = [a.split("=", 1)[1].split(",")[0] for a in args if a.endswith(",media=cdrom")]
        assert cds[0] == str(iso) and ["-boot", "once=d"] == args[args.index("-boot"):args.index("-boot") + 2]
        listed = subprocess.run(["xorriso", "-indev", cds[1], "-find", "/"], capture_output=True, text=True).stdout
        for path in ("'/autounattend.xml'", "'/enable-winrm.ps1'", f"'/{DRIVERS_FOLDER}/viostor/viostor.inf'"):
            assert path in listed, listed
        for path in driver_paths_on_the_cd(work / "autounattend.xml"):
            assert path in listed, listed

        vnc = wait_for_line(log, r"vnc://127\.0\.0\.1:(\d+)", packer, 30)
        assert ["-vnc", f"127.0.0.1:{vnc.group(1)}"] == args[args.index("-vnc"):args.index("-vnc") + 2]
        fed = 0
        try:
            deadline = time.monotonic() + 120
            while True:
                lines = log.read_text(errors="replace").split("\n")[:-1]  # whole lines only
                for line in lines[fed:]:
                    if (said := watch.line(line)) is not None:
                        shown.append(said)
                fed = len(lines)
                captured = sorted(watch.screens.glob("*.png")) if watch.screens.is_dir() else []
                if captured and color_fraction(captured[-1].read_bytes(), GREEN, 24) > 0.9:
                    break  # the CD booted, and a boot key reached its prompt
                assert time.monotonic() < deadline, f"packer's boot keys never reached the CD's prompt: {shown}"
                time.sleep(1)
        finally:
            watch.finish()

        assert packer.wait(timeout=240) != 0
        # The rest of packer's output: it says it waits for WinRM only once its keys are typed,
        # which may be after the CD's screen turned green.
        for line in log.read_text(errors="replace").split("\n")[fed:]:
            if (said := watch.line(line)) is not None:
                shown.append(said)
        assert any(re.fullmatch(r"\[0:00:\d\d\] booting the ISO", line) for line in shown), shown
        assert any(line.endswith("Windows setup (waiting for WinRM)") for line in shown), shown

        text = log.read_text(errors="replace")
        assert "Waiting for WinRM, up to timeout: 1m0s" in text and "Timeout waiting for WinRM." in text
        assert not (work / "output" / "disk.qcow2").exists()
        assert subprocess.run(["pgrep", "-f", f"file={iso},media=cdrom"], capture_output=True).returncode == 1

        # The boot disk and CPUs, packer's against an episode's of the image this build would make.
        (drive,) = [d for d in option(args, "-drive") if "media=cdrom" not in d]
        assert "if=virtio" in drive.split(","), drive
        scratch = tmp_path / "rerun.qcow2"
        subprocess.run(["qemu-img", "create", "-f", "qcow2", str(scratch), "1G"], check=True, capture_output=True)
        built = qemu_machine(rerun_paused(args, scratch, tmp_path), scratch)
        domain_xml, overlay = windows_episode_xml(tmp_path / "episode", OVMF_CODE, inputs.cpus, inputs.memory_mib,
                                                  settings.libvirt_uri)
        native = native_args(settings.libvirt_uri, domain_xml)
        episode = qemu_machine(episode_disk_and_cpu_args(native), overlay)
        assert smp(option(args, "-smp")[0]) == smp(option(native, "-smp")[0]) == \
            {"cpus": 2, "sockets": 1, "cores": 2, "threads": 1}
        assert built.cpus == episode.cpus
        assert (built.disk.driver, built.disk.disable_legacy) == ("virtio-blk-pci", "off")
        assert episode.disk.driver == "virtio-blk-pci-transitional"
        assert built.disk.parent_bus == episode.disk.parent_bus == "/machine/q35/pcie.0"
        assert built.disk.pci is not None and built.disk.pci == episode.disk.pci
        assert (built.disk.pci["slot"], built.disk.pci["id"]["device"]) == (Q35_DISK_PCI_SLOT, 0x1001)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(packer.pid, signal.SIGKILL)  # packer, and its QEMU if an assertion came first
        packer.wait()
        assert subprocess.run(["pgrep", "-f", f"file={iso},media=cdrom"], capture_output=True).returncode == 1
