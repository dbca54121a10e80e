"""What would have stopped a lab's first Windows build and validate, each checked where it
can be without Windows: the ISO's editions, the answer file's key, the drivers' write bits,
the write set of windows-core, the provisioning scripts' known traps, the guest agent's
quoting, the profile's home hand-over, and WinRM's refusal of a user its SDDL does not admit."""

import re
import stat
import xml.etree.ElementTree as ET
import subprocess
from pathlib import Path

import pytest
from winrm.exceptions import WSManFaultError

from runner.config import PROJECT_ROOT
from runner.errors import GuestUnreachable, UsageError
from runner.guest.agent import GuestAgent, GuestAgentError
from runner.guest.base import ExecResult
from runner.guest.winrm import WinRmShell, sddl_refusal
from runner.images.windows_11 import TEMPLATE_DIR, extract_drivers, write_autounattend
from runner.images.iso_files import find_seven_zip
from runner.images.windows_media import Edition, choose_edition, iso_editions
from runner.profiles import PROFILES, DesktopUser
from runner.tasks.lint import lint_suite, lint_write_set
from runner.tasks.model import load_task
from runner.tasks.syntax import powershell_mistakes
from runner.profiles.parts import ScriptLint
from test_windows_image import make_windows_iso, wim_bytes
from windows_media_standins import microsoft_layout_iso

WINDOWS = PROFILES["windows"]
U = "{urn:schemas-microsoft-com:unattend}"
RETAIL = [("Windows 11 Home", "Core"), ("Windows 11 Education", "Education"), ("Windows 11 Pro", "Professional")]


# -- the ISO's editions (item 15)

def test_the_editions_are_read_from_the_wim_inside_the_iso(tmp_path):
    iso = make_windows_iso(tmp_path, RETAIL)  # hand-made: ISO 9660 only (Microsoft's layout: test_windows_media.py)
    editions = iso_editions(find_seven_zip() or "7z", iso)
    assert [(e.index, e.name, e.edition_id) for e in editions] == [
        (1, "Windows 11 Home", "Core"), (2, "Windows 11 Education", "Education"), (3, "Windows 11 Pro", "Professional")]


def test_an_iso_without_an_install_image_is_named_as_such(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "readme.txt").write_text("not windows")
    iso = tmp_path / "other.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(tmp_path / "root")],
                   check=True, capture_output=True)
    with pytest.raises(UsageError, match="no sources/install.wim"):
        iso_editions(find_seven_zip() or "7z", iso)


def test_a_wim_header_pointing_past_its_end_is_refused(tmp_path):
    data = bytearray(wim_bytes([("Windows 11 Pro", "Professional")]))
    data[80:88] = (10**6).to_bytes(8, "little")  # the XML resource's offset, past the end

    class Reader:
        def read(self, offset, size):
            return bytes(data[offset:offset + size])

    from runner.images.windows_media import parse_wim_editions
    with pytest.raises(UsageError, match="cut short"):
        parse_wim_editions(Reader(), "stand-in")


def editions(*pairs):
    return [Edition(i, name, edition_id) for i, (name, edition_id) in enumerate(pairs, 1)]


def test_multi_edition_media_gets_pro_and_its_setup_key_unless_told():
    chosen = choose_edition(editions(*RETAIL), None, None)
    assert chosen.edition.index == 3 and chosen.product_key == "W269N-WFGWX-YVC9B-4J6C9-T83GX"
    told = choose_edition(editions(*RETAIL), "education", None)
    assert told.edition.index == 2 and told.product_key == "NW6C2-QMPVW-D7KKK-3GKT6-VCFB2"


def test_an_evaluation_iso_needs_no_key():
    chosen = choose_edition(editions(("Windows 11 Enterprise Evaluation", "EnterpriseEval")), None, None)
    assert chosen.edition.index == 1 and chosen.product_key is None


def test_home_without_a_key_and_an_unknown_edition_stop_naming_every_edition():
    with pytest.raises(UsageError, match="no generic setup key") as home:
        choose_edition(editions(*RETAIL), "Windows 11 Home", None)
    assert "--product-key" in home.value.fix
    with pytest.raises(UsageError, match="1: Windows 11 Home .* 3: Windows 11 Pro"):
        choose_edition(editions(*RETAIL), "Windows 11 Ultimate", None)
    with pytest.raises(UsageError, match="no Pro"):
        choose_edition(editions(("Windows 11 Home", "Core"), ("Windows 11 Home N", "CoreN")), None, None)


def test_the_answer_file_installs_the_chosen_index_with_its_key(tmp_path):
    write_autounattend(tmp_path / "a.xml", "pw", choose_edition(editions(*RETAIL), None, None))
    root = ET.parse(tmp_path / "a.xml").getroot()
    assert [m.findtext(f"{U}Value") for m in root.iter(f"{U}MetaData")] == ["3"]
    assert [k.findtext(f"{U}Key") for k in root.iter(f"{U}ProductKey")] == ["W269N-WFGWX-YVC9B-4J6C9-T83GX"]
    write_autounattend(tmp_path / "b.xml", "pw", choose_edition(editions(("Eval", "EnterpriseEval")), None, None))
    root = ET.parse(tmp_path / "b.xml").getroot()
    assert [m.findtext(f"{U}Value") for m in root.iter(f"{U}MetaData")] == ["1"]
    assert list(root.iter(f"{U}ProductKey")) == []


# -- the driver tree (item 14)

def test_extracted_drivers_are_writable_so_the_build_can_remove_them(tmp_path):
    root = tmp_path / "iso-root"
    for path in ("viostor/w11/amd64/viostor.inf", "NetKVM/w11/amd64/netkvm.inf"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("[Version]\n")
    iso = tmp_path / "virtio.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(root)], check=True,
                   capture_output=True)
    dest = tmp_path / "drivers"
    extract_drivers("xorriso", iso, dest)
    for path in [dest, *dest.rglob("*")]:
        assert path.stat().st_mode & stat.S_IWUSR, f"{path} is read-only"


# -- the write set of windows-core (item 2)

def test_every_built_in_suite_lints_clean():
    for suite in ("windows-core", "linux-core", "desktop-core", "linux-safety"):
        checked, problems = lint_suite(suite)
        assert checked and problems == [], [p.message for p in problems]


def copy_task(tmp_path, source: Path, task_yaml: str) -> Path:
    folder = tmp_path / source.name
    folder.mkdir()
    for path in source.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / "task.yaml").write_text(task_yaml)
    return folder


def test_a_task_whose_oracle_writes_a_watched_path_it_does_not_allow_is_an_error(tmp_path):
    source = PROJECT_ROOT / "tasks" / "windows-core" / "calc-to-notepad"
    text = (source / "task.yaml").read_text()
    without = copy_task(tmp_path, source, re.sub(r"write_set:\n  allow: .*\n", "", text))
    (problem,) = lint_write_set(load_task(without))
    assert "C:\\evals\\result.txt" in problem.message and "write_set.allow" in problem.message
    (tmp_path / "with").mkdir()
    assert lint_write_set(load_task(copy_task(tmp_path / "with", source, text))) == []


def test_the_linux_profile_finds_home_paths_in_an_oracle():
    linux, windows = PROFILES["linux"].part(ScriptLint), WINDOWS.part(ScriptLint)
    assert linux.script_paths('mkdir -p "$HOME/projects/alpha" ~/b.txt') == ["~/projects/alpha", "~/b.txt"]
    assert windows.script_paths("Set-Content -LiteralPath \"$env:USERPROFILE\\x.txt\" 'C:\\evals\\a b\\c.txt'") == [
        "~\\x.txt", "C:\\evals\\a b\\c.txt"]


# -- provisioning traps (items 3 and 10)

def test_the_old_hand_home_and_a_forced_registry_key_are_caught():
    old = ("Get-ChildItem -LiteralPath 'C:\\Users\\cu' -Recurse -Force -ErrorAction SilentlyContinue | "
           "ForEach-Object { icacls $_.FullName /setowner 'cu' /q | Out-Null }")
    assert "a process per item" in powershell_mistakes(old)[0]
    assert "deletes it first" in powershell_mistakes("New-Item -Path 'HKLM:\\SOFTWARE\\X' -Force | Out-Null")[0]
    assert powershell_mistakes("if (-not (Test-Path -LiteralPath $k)) { New-Item -Path $k -Force | Out-Null }") == []
    assert powershell_mistakes("New-Item -ItemType Directory -Force -Path 'C:\\x' | Out-Null") == []


def every_image_script() -> list[Path]:
    return sorted([*TEMPLATE_DIR.rglob("*.ps1"), *(PROJECT_ROOT / "guest_agent").rglob("*.ps1")])


@pytest.mark.parametrize("script", every_image_script(), ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_no_provisioning_or_guest_script_falls_into_a_known_trap(script):
    assert powershell_mistakes(script.read_text()) == []


def test_the_windows_profiles_own_scripts_fall_into_no_known_trap():
    user = DesktopUser("cu", "C:\\Users\\cu")
    assert powershell_mistakes(WINDOWS.scripts.hand_home_script(user)) == []
    assert "icacls" in WINDOWS.scripts.hand_home_script(user) and "S-1-5-32-544" in WINDOWS.scripts.hand_home_script(user)


def test_winrm_keeps_its_delayed_start_and_is_not_restarted_under_packer():
    text = (TEMPLATE_DIR / "setup" / "enable-winrm.ps1").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in text.split("#>", 1)[1].splitlines())
    assert "sc.exe config WinRM start= delayed-auto" in code  # test_windows_guest_scripts.py: item 3
    assert "Restart-Service" not in code and "Set-Service -Name WinRM" not in code


def test_the_winrm_sddl_admits_remote_management_users_with_execute_and_read():
    text = (TEMPLATE_DIR / "setup" / "enable-winrm.ps1").read_text()
    assert "'S-1-5-32-580'" in text and "0x20000000" in text and "0x80000000" in text
    assert "DiscretionaryAcl.AddAccess('Allow', $remoteManagementUsers" in text
    assert "WSMan:\\localhost\\Service\\RootSDDL' -Value $descriptor.GetSddlForm('All')" in text


# -- the boot and the build VM's network (items 6 and 18)

def test_the_cd_prompt_gets_a_key_a_second_for_ten_seconds_and_the_build_has_no_route_out():
    template = (TEMPLATE_DIR / "windows-11.pkr.hcl").read_text()
    (command,) = re.findall(r'boot_command = \["(.*)"\]', template)
    assert command.count("<enter>") == 10 and command.count("<wait>") == 9
    assert 'winrm_timeout    = var.winrm_timeout' in template
    assert '"user,id=user.0,restrict=on,hostfwd=tcp:127.0.0.1:{{ .SSHHostPort }}-:5985"' in template


# -- the guest agent's quoting (item 19)

class RecordingShell:
    def __init__(self):
        self.scripts = []

    def run(self, script, timeout=60.0):
        self.scripts.append(script)
        return ExecResult(0, '{"role": "desktop", "name": ""}', "")


def test_the_guest_agent_quotes_for_powershell_on_windows():
    shell = RecordingShell()
    agent = GuestAgent(shell, "& 'C:\\cu-run\\guest-agent\\invoke.ps1'", WINDOWS.scripts.quote_arguments)
    agent.accessibility_tree(app="it's $(calc)")
    assert shell.scripts[-1].endswith("'tree' '--max-depth' '20' '--max-nodes' '500' '--app' 'it''s $(calc)'")
    with pytest.raises(GuestAgentError, match="line break"):
        agent.accessibility_tree(app="x\n--max-nodes")
    invoke = (PROJECT_ROOT / "guest_agent" / "windows" / "invoke.ps1").read_text()
    assert "& schtasks.exe /run /tn 'cu-guest-agent'" in invoke and "\nStart-ScheduledTask" not in invoke


# -- WinRM's refusal by SDDL (item 1)

def test_a_shell_refused_by_the_sddl_says_so_and_not_that_the_credentials_are_wrong():
    fault = WSManFaultError(500, "Access is denied.", "<fault/>", "Access is denied.", "s:Sender", "w:AccessDenied", 5,
                            None)
    assert "not allowed by the guest's WinRM SDDL" in sddl_refusal(fault, "cu")
    assert sddl_refusal(WSManFaultError(500, "x", "", "x", "", "", 2150858793, None), "cu") is None

    class Refusing:
        def open_shell(self, codepage):
            raise fault

    shell = WinRmShell("127.0.0.1", 1, "cu", "pw", protocol_factory=Refusing)
    with pytest.raises(GuestUnreachable) as refused:
        shell.wait_ready(5)
    assert "refused cu a shell" in refused.value.message and "credentials" not in refused.value.message
    assert "image build windows-11" in refused.value.fix


# -- the first hour: doctor on the lab's media

def make_virtio_iso(tmp_path, folders):
    root = tmp_path / "virtio-root"
    for folder in folders:
        (root / folder).mkdir(parents=True)
        (root / folder / "driver.inf").write_text("[Version]\n")
    iso = tmp_path / "virtio-win.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-J", "-R", "-o", str(iso), str(root)], check=True,
                   capture_output=True)
    return iso


def test_doctor_reads_the_lab_s_media_and_says_what_the_build_would_install(tmp_path):
    from runner.vm.doctor import windows_checks

    windows = microsoft_layout_iso(tmp_path, RETAIL)
    virtio = make_virtio_iso(tmp_path, ["viostor/w11/amd64", "NetKVM/w11/amd64", "vioinput/w10/amd64",
                                        "vioscsi/w11/amd64", "Balloon/w11/amd64"])
    checks = {c.name: c for c in windows_checks(windows, virtio)}
    assert checks["windows: OVMF"].status == "ok" and checks["windows: TPM"].status == "ok"
    assert checks["windows: ISO editions"].status == "ok" and "installs Windows 11 Pro" in checks["windows: ISO editions"].detail
    virtio_check = checks["windows: virtio drivers"]
    assert virtio_check.status == "warn" and "vioinput/w10" in virtio_check.detail

    (tmp_path / "bare").mkdir()
    bare = make_virtio_iso(tmp_path / "bare", ["vioinput/w11/amd64"])
    (failed,) = [c for c in windows_checks(None, bare) if c.name == "windows: virtio drivers"]
    assert failed.status == "fail" and "viostor/none" in failed.detail
    (missing,) = windows_checks(tmp_path / "no.iso", None)[2:]
    assert missing.status == "fail" and "--windows-iso" in missing.detail and "does not exist" in missing.detail


# -- what the agent sees is on the interactive desktop

def test_setup_starts_programs_in_the_desktop_users_session_and_verification_cannot():
    user = DesktopUser("cu", "C:\\Users\\cu")
    setup = WINDOWS.scripts.privileged_prelude("C:\\cu-task", user, "setup")
    assert "function Start-InSession" in setup and "C:\\cu-run\\session\\start-in-session.ps1" in setup
    assert "Start-InSession" not in WINDOWS.scripts.privileged_prelude("C:\\cu-task", user, "verify")
    from runner.benchmarks.windows_steps import STEPS_PS1
    from runner.tasks.syntax import powershell_errors
    assert powershell_errors(setup.encode()) == [] and powershell_errors(STEPS_PS1.encode()) == []
    # WAA's launch returns once started, its execute waits, as upstream's setup controller does
    assert "function Waa-Execute([string[]]$Command) { Waa-AsUser $Command[0] @($Command | Select-Object -Skip 1) -Wait }" \
        in STEPS_PS1
    assert "-Wait:$Wait" in STEPS_PS1 and "MainWindowTitle -like \"*$Text*\"" not in STEPS_PS1
    # steps.ps1 is guest_agent/windows/benchmarks/waa-steps.ps1 as it is; setup.ps1 and collect.ps1
    # dot-source it giving each parameter its param block declares, the session helper among them
    from runner.benchmarks.windows_steps import HEADER
    assert STEPS_PS1 == (PROJECT_ROOT / "guest_agent" / "windows" / "benchmarks" / "waa-steps.ps1").read_text()
    declared = re.findall(r"\[\w+\]\$(\w+)", STEPS_PS1[STEPS_PS1.index("param("):STEPS_PS1.index("\n)\n")])
    assert declared and re.findall(r" -(\w+) ", HEADER + " ") == declared
    assert "-WaaStartInSession 'C:\\cu-run\\session\\start-in-session.ps1'" in HEADER
    assert "& $WaaStartInSession -User $env:DESKTOP_USER" in STEPS_PS1
    helper = (TEMPLATE_DIR / "session" / "start-in-session.ps1").read_text()
    assert "New-ScheduledTaskPrincipal -UserId $User -LogonType Interactive -RunLevel Limited" in helper
    assert "& schtasks.exe /run /tn $name" in helper and "LastRunTime" in helper


def test_waa_commands_are_started_as_upstreams_server_starts_them_on_windows():
    from runner.benchmarks.linux_steps import Script
    from runner.benchmarks.windows_steps import STEP_LINES

    def launch(command):
        return STEP_LINES["launch"]({"command": command}, Script())

    assert launch(["google-chrome", "--remote-debugging-port=1337"]) == \
        "Waa-Launch @('chrome', '--remote-debugging-port=1337')"
    assert launch(["start", "ms-settings:"]) == "Waa-LaunchThroughCmd @('start', 'ms-settings:')"
    assert launch(["code", "~/project"]) == "Waa-LaunchThroughCmd @('code', '~/project')"
    assert launch(["socat", "tcp-listen:9222,fork", "tcp:localhost:1337"]).startswith("# upstream's socat")
    assert launch("vlc --no-video-title-show") == "Waa-LaunchShell 'vlc --no-video-title-show'"
    from runner.benchmarks.windows_steps import STEPS_PS1
    # every argument goes through Waa-Path at run time: ~/ and upstream's C:\Users\Docker become the user's home
    assert "$mapped = @($Arguments | ForEach-Object { Waa-Path $_ })" in STEPS_PS1
    assert "$Path.StartsWith('~/')" in STEPS_PS1
    from runner.benchmarks.linux_steps import translate_steps
    script = Script()
    translate_steps([{"type": "execute", "parameters": {"command": ["x"], "until": {"returncode": 0}}}], script,
                    STEP_LINES)
    assert script.lines == [] and "until" in script.problems[0]
