"""The Windows boot disk keeps its identity from the build to every clone.

- Setup is told where viostor is: the answer file's DriverPaths (Microsoft's unattend names:
  Microsoft-Windows-PnpCustomizationsWinPE, windowsPE pass, DriverPaths, PathAndCredentials with
  wcm:action and wcm:keyValue, Path) name the folder extract_drivers and packer's cd_files put it
  in on the CUSETUP CD, under each letter that CD can get in Windows PE.
- The build's QEMU (packer's arguments, derived from the template as packer's qemu builder makes
  them: builder/qemu/step_run.go of packer 1.6.6 and of packer-plugin-qemu) and an episode's QEMU
  (libvirt's domxml-to-native of the XML cu-run builds) are asked over QMP what disk device and
  CPUs they made: the same device at the same address, the same topology, and as pinned in
  tests/golden/windows-boot-disk.json. A template or domain that moves either side fails here.
"""

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path, PureWindowsPath

import pytest

from domain_specs import (
    QemuMachine,
    episode_disk_and_cpu_args,
    native_args,
    option,
    qemu_machine,
    smp,
    windows_episode_xml,
)
from runner.images.windows_11 import (
    DRIVERS_FOLDER,
    OVMF_CANDIDATES,
    TEMPLATE_DIR,
    VIRTIO_DRIVERS,
    WindowsInputs,
    extract_drivers,
    packer_vars,
)
from runner.sockets import free_port

U = "{urn:schemas-microsoft-com:unattend}"
WCM = "{http://schemas.microsoft.com/WMIConfig/2002/State}"
TEMPLATE = TEMPLATE_DIR / "windows-11.pkr.hcl"
GOLDEN = Path(__file__).parent.parent / "golden" / "windows-boot-disk.json"
STORAGE_DRIVER = "viostor"  # the virtio-blk driver: the boot disk's
# Windows PE: X: is the boot RAM disk; the build's disk is blank (no volume, so no letter); the
# install ISO and CUSETUP take the first free letters in either order; one spare.
CUSETUP_LETTERS = {"C", "D", "E", "F"}


# -- DriverPaths


def driver_paths() -> ET.Element:
    root = ET.parse(TEMPLATE_DIR / "autounattend.xml").getroot()
    found = [(s.get("pass"), c) for s in root.findall(f"{U}settings") for c in s.findall(f"{U}component")
             if c.get("name") == "Microsoft-Windows-PnpCustomizationsWinPE"]
    assert [p for p, _c in found] == ["windowsPE"], "DriverPaths belongs in the windowsPE pass, once"
    component = found[0][1]
    assert component.attrib == {"name": "Microsoft-Windows-PnpCustomizationsWinPE", "processorArchitecture": "amd64",
                                "publicKeyToken": "31bf3856ad364e35", "language": "neutral",
                                "versionScope": "nonSxS"}
    assert [child.tag for child in component] == [f"{U}DriverPaths"]
    return component.find(f"{U}DriverPaths")


def where_extract_drivers_puts(driver: str, tmp_path: Path) -> PureWindowsPath:
    """DRIVER's folder on the CUSETUP CD: extract_drivers run on a stand-in virtio-win ISO into the
    folder packer_vars hands packer as drivers_dir, which cd_files puts at the CD's root by name."""
    root = tmp_path / "virtio-root"
    for name in VIRTIO_DRIVERS:
        (root / name / "w11" / "amd64").mkdir(parents=True)
        (root / name / "w11" / "amd64" / f"{name.lower()}.inf").write_text("[Version]\n")
    iso = tmp_path / "virtio.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(root)], check=True,
                   capture_output=True)
    work = tmp_path / "work"
    drivers_dir = Path(packer_vars(WindowsInputs(Path("i"), Path("v"), Path("p")), work, "c", "pw", "0", "v")
                       ["drivers_dir"])
    extract_drivers("xorriso", iso, drivers_dir)
    # A folder without a trailing slash in cd_files lands at the CD's root under its own name
    # (the e2e test lists the real CD); the answer file, setup/ and the drivers share the CD.
    assert re.search(r"cd_files\s*=\s*\[.*\bvar\.drivers_dir\]", TEMPLATE.read_text())
    (inf,) = drivers_dir.glob(f"{driver}/*.inf")
    return PureWindowsPath(*inf.parent.relative_to(drivers_dir.parent).parts)


def test_driver_paths_name_viostor_on_the_setup_cd_under_every_letter_it_can_get(tmp_path):
    assert STORAGE_DRIVER in VIRTIO_DRIVERS
    on_cd = where_extract_drivers_puts(STORAGE_DRIVER, tmp_path)
    assert on_cd.parts[0] == DRIVERS_FOLDER == "$WinPEDriver$"  # the folder Setup also finds by itself
    items = driver_paths().findall(f"{U}PathAndCredentials")
    assert all(item.get(f"{WCM}action") == "add" for item in items)
    keys = [item.get(f"{WCM}keyValue") for item in items]
    assert all(keys) and len(set(keys)) == len(keys), f"each wcm:keyValue (the item's Key) must be unique: {keys}"
    assert all([child.tag for child in item] == [f"{U}Path"] for item in items)
    paths = [PureWindowsPath(item.findtext(f"{U}Path")) for item in items]
    assert all(0 < len(str(p)) <= 259 for p in paths)  # Path's limit in Microsoft's reference
    assert {p.drive.rstrip(":") for p in paths} == CUSETUP_LETTERS
    assert "X:" not in {p.drive for p in paths}  # Windows PE's own RAM disk
    for path in paths:
        assert path == PureWindowsPath(path.drive + "\\") / on_cd, path


# -- the build's QEMU, as packer's qemu builder makes it


def source_attributes(template: str) -> dict[str, str]:
    """The source "qemu" block's one-line attributes, as written (expressions unevaluated)."""
    block = re.search(r'^source "qemu" "[^"]+" \{\n(.*?)^\}', template, re.M | re.S)
    assert block
    return dict(re.findall(r"^  (\w+)\s*=\s*(.+?)\s*$", block.group(1), re.M))


def qemuargs(template: str) -> list[tuple[str, str]]:
    """The qemuargs rows, each (flag, value expression)."""
    block = re.search(r"^  qemuargs = \[\n(.*?)^  \]", template, re.M | re.S)
    assert block
    return re.findall(r'^\s*\[\s*"(-[\w-]+)"\s*,\s*(.+?)\s*\],?\s*$', block.group(1), re.M)


def evaluate(expression: str, variables: dict[str, str], host_port: int) -> str:
    """An HCL value of the template: a string literal with ${var.x} in it, var.x, or a number; then
    packer's own {{ .SSHHostPort }}."""
    if expression.startswith("var."):
        value = variables[expression.removeprefix("var.")]
    elif expression.startswith('"'):
        value = re.sub(r"\$\{var\.(\w+)\}", lambda m: variables[m.group(1)], json.loads(expression))
    else:
        value = expression
    return value.replace("{{ .SSHHostPort }}", str(host_port))


def packer_qemu_args(template: str, variables: dict[str, str], cds: list[Path], host_port: int,
                     packer: str = "1.6.6") -> list[str]:
    """The QEMU command line (without the binary) packer's qemu builder runs for TEMPLATE, as
    step_run.go makes it: its defaults for each flag (the disk as -drive if=<disk_interface>, the CDs
    on the machine's IDE/AHCI, the NIC as -device <net_device>, -smp from cpus: cpus=N,sockets=N in
    packer 1.6.6, N in the plugin), each replaced wholly by qemuargs' values for the same flag, and
    the NIC added back to a qemuargs -device list that lacks it. VNC is left out (QEMU is run here
    with no display)."""
    attrs = source_attributes(template)

    def value(name: str) -> str:
        return evaluate(attrs[name], variables, host_port)

    cpus = int(value("cpus"))
    disk = Path(value("output_directory")) / value("vm_name")
    defaults: dict[str, list[str]] = {
        "-boot": ["once=d"],
        "-name": [value("vm_name")],
        "-machine": [f"type={value('machine_type')},accel={value('accelerator')}"],
        "-netdev": [f"user,id=user.0,hostfwd=tcp::{host_port}-:5985"],
        "-m": [f"{value('memory')}M"],
        "-smp": ([f"cpus={cpus},sockets={cpus}"] if cpus > 1 else []) if packer == "1.6.6" else [str(cpus)],
        "-device": [f"{value('net_device')},netdev=user.0"],
        "-drive": [f"file={disk},if={value('disk_interface')},cache={value('disk_cache')},"
                   f"discard={value('disk_discard')},format={value('format')}",
                   *(f"file={cd},media=cdrom" for cd in cds)],
    }
    given: dict[str, list[str]] = {}
    for flag, expression in qemuargs(template):
        given.setdefault(flag, []).append(evaluate(expression, variables, host_port))
    if "-device" in given and value("net_device") not in "".join(given["-device"]):
        given["-device"] += defaults["-device"]
    merged = {**{flag: values for flag, values in defaults.items() if flag not in given}, **given}
    return [word for flag, values in merged.items() for v in values for word in (flag, v)]


def build_variables(tmp_path: Path) -> dict[str, str]:
    ovmf_code, ovmf_vars = next((c, v) for c, v in OVMF_CANDIDATES if Path(c).is_file())
    work = tmp_path / "build"
    (work / "output").mkdir(parents=True)
    (work / "OVMF_VARS.fd").write_bytes(Path(ovmf_vars).read_bytes())
    inputs = WindowsInputs(Path("i"), Path("v"), Path("p"), accel="tcg")
    return packer_vars(inputs, work, ovmf_code, "pw", "0" * 64, "vpw", free_port())


def the_build(tmp_path: Path, template: str, packer: str = "1.6.6") -> tuple[list[str], QemuMachine]:
    variables = build_variables(tmp_path)
    disk = Path(variables["output_dir"]) / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-f", "qcow2", str(disk), "1G"], check=True, capture_output=True)
    cds = [tmp_path / "windows.iso", tmp_path / "cusetup.iso"]
    for cd in cds:
        cd.write_bytes(b"\0" * 2048)
    args = packer_qemu_args(template, variables, cds, free_port(), packer)
    return args, qemu_machine(args, disk)


# -- an episode's QEMU, as libvirt makes it from cu-run's XML


def episode_xml(tmp_path: Path, libvirt_uri: str) -> tuple[str, Path]:
    """The episode domain of the image the build above makes: the CPUs and memory it records."""
    variables = build_variables(tmp_path / "for-image")
    return windows_episode_xml(tmp_path, variables["ovmf_code"], int(variables["cpus"]), int(variables["memory_mib"]),
                               libvirt_uri)


def the_episode(libvirt_uri: str, domain_xml: str, disk: Path) -> tuple[list[str], QemuMachine]:
    native = native_args(libvirt_uri, domain_xml)
    return native, qemu_machine(episode_disk_and_cpu_args(native), disk)


def identity(build: tuple[list[str], QemuMachine], episode: tuple[list[str], QemuMachine]) -> dict:
    """What must match, and what the golden file pins: each side's disk device and -smp as its
    command line gives them, and what the guest sees (the disk's PCI record, the CPUs)."""
    build_args, built = build
    native, run = episode
    (episode_disk,) = [json.loads(d) for d in option(native, "-device") if '"virtio-disk0"' in d]
    (build_drive,) = [d for d in option(build_args, "-drive") if "media=cdrom" not in d]
    return {
        "build": {"drive": re.sub(r"file=[^,]*,", "", build_drive), "device": built.disk.driver,
                  "bus": built.disk.parent_bus, "disable-legacy": built.disk.disable_legacy,
                  "smp": smp(option(build_args, "-smp")[0])},
        "episode": {"device": episode_disk["driver"], "bus": episode_disk["bus"], "addr": episode_disk["addr"],
                    "smp": smp(option(native, "-smp")[0])},
        "guest": {"disk": {k: (built.disk.pci or {}).get(k) for k in ("bus", "slot", "function", "id", "class_info")},
                  "cpus": built.cpus},
    }


def test_the_build_and_every_episode_give_windows_the_same_boot_disk_and_cpus(tmp_path, settings):
    template = TEMPLATE.read_text()
    assert "-smp" in dict(qemuargs(template)), "packer's own -smp differs between 1.6.6 and the plugin: pin it"
    build = the_build(tmp_path / "b", template)
    episode = the_episode(settings.libvirt_uri, *episode_xml(tmp_path / "e", settings.libvirt_uri))
    built, run = build[1], episode[1]
    assert built.disk.pci is not None and built.disk.pci == run.disk.pci  # ids, class, BARs, slot: what Windows sees
    assert built.cpus == run.cpus
    assert built.disk.pci["id"]["device"] == 0x1001, "transitional (1af4:1001), not modern-only (1af4:1042)"
    assert built.disk.parent_bus == run.disk.parent_bus == "/machine/q35/pcie.0"
    # The build's device is a plain virtio-blk-pci that QEMU made transitional on the root bus; the
    # episode's is named so (libvirt's model='virtio-transitional'), whatever QEMU's rule for the bus.
    assert built.disk.driver == "virtio-blk-pci" and built.disk.disable_legacy == "off"
    assert run.disk.driver == "virtio-blk-pci-transitional"
    facts = identity(build, episode)
    assert facts["build"]["smp"] == facts["episode"]["smp"] == {"cpus": 2, "sockets": 1, "cores": 2, "threads": 1}
    if os.environ.get("CU_RUN_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(facts, indent=2) + "\n")
    assert facts == json.loads(GOLDEN.read_text()), \
        "the Windows boot disk or CPUs changed: every image built before would boot its clones on another device"


@pytest.mark.parametrize("packer", ["1.6.6", "plugin"])
def test_packer_1_6_6_and_the_plugin_give_the_build_the_same_arguments(tmp_path, packer):
    variables = build_variables(tmp_path)
    args = packer_qemu_args(TEMPLATE.read_text(), variables, [], 5995, packer)
    assert option(args, "-smp") == [f"cpus={variables['cpus']},sockets=1,cores={variables['cpus']},threads=1"]
    assert option(args, "-device") == ["virtio-net,netdev=user.0"]  # no -device of ours: packer keeps its disk


def test_a_template_without_its_smp_or_with_another_device_fails_the_comparison(tmp_path, settings):
    template = TEMPLATE.read_text()
    episode = the_episode(settings.libvirt_uri, *episode_xml(tmp_path / "e", settings.libvirt_uri))
    no_smp = re.sub(r'^\s*\["-smp",.*\n', "", template, flags=re.M)
    assert no_smp != template
    assert the_build(tmp_path / "a", no_smp)[1].cpus != episode[1].cpus  # packer 1.6.6: a socket per CPU
    moved = template.replace('["-cpu", var.cpu_model],', '["-cpu", var.cpu_model],\n    ["-device", "virtio-rng-pci"],')
    assert moved != template
    assert (the_build(tmp_path / "b", moved)[1].disk.pci or {})["slot"] != (episode[1].disk.pci or {})["slot"]


def test_the_domain_libvirt_would_choose_fails_the_comparison(tmp_path, settings):
    build = the_build(tmp_path / "b", TEMPLATE.read_text())
    domain_xml, disk = episode_xml(tmp_path / "e", settings.libvirt_uri)
    root = ET.fromstring(domain_xml)
    disk_el = root.find("./devices/disk")
    del disk_el.attrib["model"]
    disk_el.remove(disk_el.find("address"))
    root.find("./cpu").remove(root.find("./cpu/topology"))
    unpinned = the_episode(settings.libvirt_uri, ET.tostring(root, encoding="unicode"), disk)[1]
    # Behind a pcie-root-port, modern-only (1af4:1042 once the firmware numbers the port's bus).
    assert unpinned.disk.parent_bus != build[1].disk.parent_bus
    assert (unpinned.disk.driver, unpinned.disk.disable_legacy) == ("virtio-blk-pci", "on")
    assert unpinned.cpus != build[1].cpus  # a socket per vCPU
