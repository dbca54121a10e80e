"""The Windows image, checked as far as a host without Windows media allows: the Packer
template validated by the real packer, the answer file's settings, every PowerShell file
parsed by a real grammar, the build's preflight, the driver extraction, licence warnings."""

import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from runner.images.catalog import Image, ImageManifest
from runner.profiles.manifest import Credentials, ScreenSize, UefiFirmware, WinRmAccess
from runner.config import PROJECT_ROOT
from runner.errors import UsageError
from runner.tasks.syntax import script_errors
from runner.images.windows_11 import (
    DRIVERS_FOLDER,
    TEMPLATE_DIR,
    WindowsInputs,
    extract_drivers,
    licence_warning,
    packer_argv,
    packer_vars,
    preflight,
    write_autounattend,
)

from windows_media_standins import microsoft_layout_iso

U = "{urn:schemas-microsoft-com:unattend}"


def wim_bytes(editions: list[tuple[str, str]], *, xml_offset: int = 208) -> bytes:
    """A stand-in install.wim: the published header layout, and the XML resource listing
    EDITIONS ([(display name, edition id)]), UTF-16LE with a BOM, at XML_OFFSET."""
    images = "".join(f"<IMAGE INDEX='{i}'><NAME>{name}</NAME><DISPLAYNAME>{name}</DISPLAYNAME>"
                      f"<WINDOWS><EDITIONID>{edition}</EDITIONID></WINDOWS></IMAGE>"
                      for i, (name, edition) in enumerate(editions, 1))
    xml = ("\ufeff<WIM><TOTALBYTES>1</TOTALBYTES>" + images + "</WIM>").encode("utf-16-le")
    header = bytearray(208)
    header[0:8] = b"MSWIM\0\0\0"
    struct.pack_into("<III", header, 8, 208, 0x10D00, 0)
    struct.pack_into("<HHI", header, 40, 1, 1, len(editions))
    struct.pack_into("<QQQ", header, 72, len(xml) | (0x02 << 56), xml_offset, len(xml))
    return bytes(header) + b"\0" * (xml_offset - 208) + xml


def make_windows_iso(tmp_path, editions, name="win11.iso"):
    root = tmp_path / f"{name}-root"
    (root / "sources").mkdir(parents=True)
    (root / "sources" / "install.wim").write_bytes(wim_bytes(editions))
    iso = tmp_path / name
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(root)], check=True,
                   capture_output=True)
    return iso


@pytest.fixture
def inputs(tmp_path):
    # Laid out as Microsoft's media are: install.wim in the UDF tree only.
    microsoft_layout_iso(tmp_path, [("Windows 11 Enterprise Evaluation", "EnterpriseEval")], name="win11.iso")
    for name in ("virtio-win.iso", "python-3.13.1-amd64.exe"):
        (tmp_path / name).write_bytes(b"placeholder " + name.encode())
    return WindowsInputs(iso=tmp_path / "win11.iso", virtio_iso=tmp_path / "virtio-win.iso",
                         python_installer=tmp_path / "python-3.13.1-amd64.exe")


def test_packer_validates_the_template_with_the_variables_cu_run_passes(inputs, tmp_path):
    packer = shutil.which("packer")
    assert packer, "packer is missing: scripts/setup-host.sh installs it"
    work = tmp_path / "work"
    (work / DRIVERS_FOLDER).mkdir(parents=True)
    write_autounattend(work / "autounattend.xml", "pw")
    (work / "OVMF_VARS.fd").write_bytes(b"")
    variables = packer_vars(inputs, work, "/usr/share/OVMF/OVMF_CODE_4M.fd", "pw", "0" * 64, "vpw")
    done = subprocess.run(packer_argv(packer, "validate", variables), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    # and a variable the template does not know is refused, so the two cannot drift apart silently
    bad = subprocess.run(packer_argv(packer, "validate", {**variables, "no_such_var": "x"}),
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0


def unattend():
    return ET.parse(TEMPLATE_DIR / "autounattend.xml").getroot()


def component(root, pass_name, name):
    (settings,) = [s for s in root.findall(f"{U}settings") if s.get("pass") == pass_name]
    return next(c for c in settings.findall(f"{U}component") if c.get("name") == name)


def test_answer_file_autologon_is_permanent_for_a_local_administrator():
    shell = component(unattend(), "oobeSystem", "Microsoft-Windows-Shell-Setup")
    autologon = shell.find(f"{U}AutoLogon")
    assert autologon.findtext(f"{U}Enabled") == "true" and autologon.findtext(f"{U}Username") == "cu"
    assert autologon.find(f"{U}LogonCount") is None  # a count would end autologon after N boots
    (account,) = shell.findall(f"{U}UserAccounts/{U}LocalAccounts/{U}LocalAccount")
    assert account.findtext(f"{U}Name") == "cu" and account.findtext(f"{U}Group") == "Administrators"
    oobe = shell.find(f"{U}OOBE")
    assert oobe.findtext(f"{U}HideOnlineAccountScreens") == "true"
    assert oobe.findtext(f"{U}HideWirelessSetupInOOBE") == "true"
    assert oobe.findtext(f"{U}HideEULAPage") == "true"


def test_answer_file_bypasses_tpm_and_secure_boot_and_skips_the_network_screen():
    setup = component(unattend(), "windowsPE", "Microsoft-Windows-Setup")
    commands = [c.findtext(f"{U}Path") for c in setup.iter(f"{U}RunSynchronousCommand")]
    for check in ("BypassTPMCheck", "BypassSecureBootCheck"):
        assert any(f"LabConfig /v {check} /t REG_DWORD /d 1" in c for c in commands), check
    deployment = component(unattend(), "specialize", "Microsoft-Windows-Deployment")
    assert any("BypassNRO" in c.findtext(f"{U}Path") for c in deployment.iter(f"{U}RunSynchronousCommand"))


def test_answer_file_loads_virtio_drivers_and_partitions_gpt():
    # Setup finds $WinPEDriver$ at the root of whichever drive the CD got; DriverPaths, which names
    # viostor there too, is tested in test_windows_disk_identity.py.
    template = (TEMPLATE_DIR / "windows-11.pkr.hcl").read_text()
    assert "cd_files = [var.autounattend, \"${path.root}/setup/\", var.drivers_dir]" in template
    assert Path(packer_vars(WindowsInputs(Path("i"), Path("v"), Path("p")), Path("/w"), "c", "pw", "0", "v")
                ["drivers_dir"]).name == "$WinPEDriver$"
    setup = component(unattend(), "windowsPE", "Microsoft-Windows-Setup")
    types = [p.findtext(f"{U}Type") for p in setup.iter(f"{U}CreatePartition")]
    assert types == ["EFI", "MSR", "Primary"]


def test_first_logon_enables_winrm_from_the_setup_cd():
    shell = component(unattend(), "oobeSystem", "Microsoft-Windows-Shell-Setup")
    (command,) = [c.findtext(f"{U}CommandLine") for c in shell.iter(f"{U}SynchronousCommand")]
    assert "enable-winrm.ps1" in command
    script = (TEMPLATE_DIR / "setup" / "enable-winrm.ps1").read_text()
    assert "Enable-PSRemoting" in script and "LocalAccountTokenFilterPolicy" in script
    assert "-Profile Any" in script


def test_the_password_written_in_keeps_the_answer_file_well_formed(tmp_path):
    write_autounattend(tmp_path / "a.xml", "p<&>'\"w")
    root = ET.parse(tmp_path / "a.xml").getroot()
    values = [v.text for v in root.iter(f"{U}Value") if v.text and v.text.startswith("p")]
    assert values == ["p<&>'\"w", "p<&>'\"w"]
    assert "CU_PASSWORD_PLACEHOLDER" not in (tmp_path / "a.xml").read_text()


POWERSHELL = sorted([*(PROJECT_ROOT / "packer").rglob("*.ps1"), *(PROJECT_ROOT / "guest_agent").rglob("*.ps1")])


@pytest.mark.parametrize("script", POWERSHELL, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_powershell_file_parses(script):
    assert script_errors(script) == []


def test_a_planted_syntax_error_is_found(tmp_path):
    broken = tmp_path / "broken.ps1"
    broken.write_text((TEMPLATE_DIR / "scripts" / "autologon.ps1").read_text().replace("-Value '1'", "-Value ('1'"))
    assert script_errors(broken)


def test_preflight_names_every_problem_at_once(inputs, tmp_path):
    bad = WindowsInputs(iso=tmp_path / "missing.iso", virtio_iso=inputs.virtio_iso,
                        python_installer=tmp_path / "python.exe", virtio_sha256="0" * 64,
                        evals_seed=tmp_path / "no-seed", licence_days=-1)
    (tmp_path / "python.exe").write_bytes(b"x")
    with pytest.raises(UsageError) as caught:
        preflight(bad, tmp_path / "catalog")
    message = caught.value.message
    assert "missing.iso does not exist" in message
    assert "virtio-win.iso has sha256" in message and "expected 000" in message
    assert "python.exe is not a python-3.13.x-amd64.exe" in message
    assert "no-seed is not a folder" in message and "--licence-days" in message
    assert message.count("\n  - ") == 5


def test_preflight_passes_with_good_inputs_and_finds_the_tools(inputs, tmp_path):
    tools = preflight(inputs, tmp_path / "catalog")
    assert Path(tools.ovmf_code).is_file() and Path(tools.ovmf_vars).is_file()
    assert tools.packer_version >= (1, 6, 0)


def make_iso(tmp_path, layout):
    root = tmp_path / "iso-root"
    for path in layout:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("[Version]\n")
    iso = tmp_path / "virtio.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(root)], check=True,
                   capture_output=True)
    return iso


def test_drivers_are_extracted_preferring_windows_11(tmp_path):
    iso = make_iso(tmp_path, ["viostor/w11/amd64/viostor.inf", "viostor/w10/amd64/old.inf",
                              "NetKVM/w10/amd64/netkvm.inf", "vioinput/w11/ARM64/x.inf"])
    found = extract_drivers("xorriso", iso, tmp_path / "drivers")
    assert found == ["viostor/w11", "NetKVM/w10"]
    assert (tmp_path / "drivers" / "viostor" / "viostor.inf").is_file()
    assert not (tmp_path / "drivers" / "viostor" / "old.inf").exists()
    assert not (tmp_path / "drivers" / "vioinput").exists()


def test_an_iso_without_storage_drivers_is_refused(tmp_path):
    iso = make_iso(tmp_path, ["README.txt"])
    with pytest.raises(UsageError, match="no Windows 10/11 amd64 storage and network drivers"):
        extract_drivers("xorriso", iso, tmp_path / "drivers")


def windows_manifest(**overrides):
    base = dict(name="windows-11", profile="windows", disk="disk.qcow2", disk_sha256="0" * 64, disk_bytes=1,
                screen=ScreenSize(width=1280, height=800), credentials=Credentials(user="cu", password="pw"),
                winrm=WinRmAccess(user="cu", password="pw"),
                firmware=UefiFirmware(code="/usr/share/OVMF/OVMF_CODE_4M.fd", vars="OVMF_VARS.fd"),
                built_at=datetime.now(UTC), build_seconds=1.0, builder="test")
    base.update(overrides)
    return ImageManifest(**base)


def test_licence_warning_starts_two_weeks_before_the_end():
    today = date(2026, 11, 30)
    image = lambda days: Image(Path("/x"), windows_manifest(licence_expires=today + timedelta(days=days)))  # noqa: E731
    assert licence_warning(image(20), today) is None
    assert "ends in 13 days" in licence_warning(image(13), today)
    assert "ended on" in licence_warning(image(-1), today)
    assert licence_warning(Image(Path("/x"), windows_manifest()), today) is None


def test_a_windows_manifest_needs_winrm_and_firmware():
    assert windows_manifest().shell_port == 5985
    with pytest.raises(ValidationError, match="needs 'winrm' and 'firmware'"):
        windows_manifest(winrm=None)


def test_windows_episode_domain_uses_the_image_firmware_and_forwards_winrm(tmp_path):
    from runner.vm.domain import episode_domain_spec
    from runner.hypervisor.domain_xml import SlotIdentity
    from runner.owner import Owner

    folder = tmp_path / "windows-11"
    folder.mkdir()
    spec = episode_domain_spec(Image(folder, windows_manifest()), SlotIdentity("r", 0), tmp_path / "ep", "kvm",
                               45985, Owner(1, 1), "qemu:///system")
    assert spec.firmware.code == Path("/usr/share/OVMF/OVMF_CODE_4M.fd")
    assert spec.firmware.nvram == tmp_path / "ep" / "OVMF_VARS.fd"
    assert [(f.host_port, f.guest_port) for f in spec.forwards] == [(45985, 5985)]
    assert spec.boot is None
    assert spec.vcpus == 1  # an image that records no CPU count keeps the old one
    two = episode_domain_spec(Image(folder, windows_manifest(vcpus=2)), SlotIdentity("r", 0), tmp_path / "ep", "kvm",
                              45985, Owner(1, 1), "qemu:///system")
    assert two.vcpus == 2  # the episode VM gets the CPUs the image was built for


def test_the_build_records_its_cpu_count_and_a_desktop_check_a_standard_user_can_run():
    source = (TEMPLATE_DIR.parents[1] / "runner" / "images" / "windows_11.py").read_text()
    assert "vcpus=inputs.cpus" in source
    from runner.images.windows_11 import DESKTOP_READY
    assert "-IncludeUserName" not in DESKTOP_READY and "SessionId -gt 0" in DESKTOP_READY
    assert "catch { exit 1 }" in DESKTOP_READY  # anything unexpected is "not ready"


def test_doctor_warns_about_an_ending_licence(tmp_path):
    import json as _json

    from runner.config import Settings
    from runner.vm.doctor import _licences

    settings = Settings.resolve(cache_dir=tmp_path)
    folder = settings.images_dir / "windows-11"
    folder.mkdir(parents=True)
    manifest = windows_manifest(licence_expires=date.today() + timedelta(days=5))
    (folder / "manifest.json").write_text(_json.dumps(manifest.model_dump(mode="json")))
    (check,) = _licences(settings)
    assert check.status == "warn" and "ends in 5 days" in check.detail and "--force" in check.fix


def test_the_last_provisioning_step_splits_the_desktop_user_from_the_verifier_account():
    """The autologon user ends a standard user (the agent acts as it); the runner verifies as a
    separate administrator whose password only the manifest knows."""
    template = (TEMPLATE_DIR / "windows-11.pkr.hcl").read_text()
    last = template.rindex('provisioner "powershell"')
    assert "scripts/accounts.ps1" in template[last:] and "CU_VERIFIER_PASSWORD=${var.verifier_password}" in template[last:]
    accounts = (TEMPLATE_DIR / "scripts" / "accounts.ps1").read_text()
    # Demoted by packer's shutdown command, the last thing packer runs as that user; shut down only
    # once the demotion worked.
    assert "Remove-LocalGroupMember" not in accounts
    shutdown = re.search(r'shutdown_command = "(.*)"\n', template).group(1)
    assert shutdown.index("$ErrorActionPreference = 'Stop'") < shutdown.index(
        "Remove-LocalGroupMember -Group 'Administrators' -Member '${var.admin_user}'") < shutdown.index("shutdown.exe")
    assert "Add-LocalGroupMember -Group 'Administrators' -Member $env:CU_VERIFIER_USER" in accounts
    assert "Add-LocalGroupMember -Group 'Remote Management Users' -Member $env:CU_USER" in accounts
