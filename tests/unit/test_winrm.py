"""WinRmShell against FakeWsmanServer: a loopback server speaking the WS-Management exchange."""

import time

import pytest
import requests
from winrm.exceptions import InvalidCredentialsError, WinRMOperationTimeoutError, WinRMTransportError
from fakes.wsman import DEFAULT_ROOT_SDDL, ENABLE_WINRM, FakeWsmanServer, Reply, provisioned_sddl, sddl_admits

from runner.errors import CommandTimeout, GuestUnreachable
from runner.guest.winrm import CHUNK_CHARS, PRELUDE, WinRmShell, decode_clixml, is_transient_winrm_error


@pytest.fixture
def server():
    s = FakeWsmanServer()
    yield s
    s.close()


def shell_for(server, password="secret"):
    return WinRmShell("127.0.0.1", server.port, "cu", password)  # NTLM with message encryption, as production


def test_a_long_script_travels_by_upload_byte_for_byte(server):
    script = "".join(f"Write-Output 'line {i}: {'x' * 60}'\n" for i in range(400)) + "# Zürich – 東京\n"
    assert len(script) > 4 * 8192
    server.handler = lambda text: Reply(b"ok\r\n")
    result = shell_for(server).run(script, timeout=60)
    assert result.exit_code == 0 and result.stdout == "ok\r\n"
    (received,) = server.scripts
    assert received == PRELUDE + script
    # The prelude (guest_agent/windows/winrm-prelude.ps1): UTF-8 out, no progress records
    assert [line for line in PRELUDE.splitlines() if not line.startswith("#")] == [
        "$ProgressPreference = 'SilentlyContinue'", "[Console]::OutputEncoding = [System.Text.Encoding]::UTF8",
        "$OutputEncoding = [System.Text.Encoding]::UTF8"]
    uploads = [c for c in server.command_lines if "-EncodedCommand" in c]
    assert len(uploads) > len(script.encode()) * 4 / 3 / CHUNK_CHARS  # it went in chunks
    assert all(len(c) < 8191 for c in server.command_lines)  # every command line fits cmd's limit
    assert server.files == {}  # the uploaded script was removed after it ran


def test_the_whole_exchange_is_create_command_receive_signal_delete(server):
    shell_for(server).run("Write-Output hi", timeout=30)
    assert server.actions[0] == "Create" and server.actions[-1] == "Delete"
    assert {"Command", "Receive", "Signal"} <= set(server.actions)
    assert server.actions.count("Command") == server.actions.count("Signal")


def test_non_ascii_output_survives(server):
    text = "Grüße aus Zürich – 東京 ✓\r\n"
    server.handler = lambda _script: Reply(text.encode("utf-8"))
    assert shell_for(server).run("Write-Output x").stdout == text


CLIXML = ('#< CLIXML\r\n<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04">'
          '<Obj S="progress" RefId="0"><TN RefId="0"><T>System.Management.Automation.PSCustomObject</T></TN>'
          '<MS><I64 N="SourceId">1</I64><PR N="Record"><AV>Preparing modules</AV></PR></MS></Obj>'
          '<S S="Error">Get-Item : Cannot find path \'C:\\nope\' because it does not exist._x000D__x000A_</S>'
          '<S S="Error">At line:1 char:1_x000D__x000A_</S></Objs>')


def test_clixml_errors_are_decoded_to_readable_text(server):
    server.handler = lambda _script: Reply(b"", CLIXML.encode(), 1)
    result = shell_for(server).run("Get-Item C:\\nope")
    assert result.exit_code == 1
    assert result.stderr == "Get-Item : Cannot find path 'C:\\nope' because it does not exist.\nAt line:1 char:1\n"
    assert "progress" not in result.stderr and "Preparing" not in result.stderr


def test_decode_clixml_leaves_plain_text_alone():
    assert decode_clixml("plain error\n") == "plain error\n"


def test_a_stalled_receive_hits_the_wall_clock_limit(server):
    server.handler = lambda _script: Reply(stall=True)
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="time limit"):
        shell_for(server).run("Start-Sleep 3600", timeout=2)
    assert time.monotonic() - started < 10
    assert server.actions[-1] == "Delete"  # the shell, and with it the process, is gone


def test_files_go_in_and_come_back(server, tmp_path):
    local = tmp_path / "blob.bin"
    local.write_bytes(bytes(range(256)) * 40)
    shell = shell_for(server)
    shell.put(local, r"C:\evals\blob.bin")
    assert server.files[r"C:\evals\blob.bin"] == local.read_bytes()
    back = tmp_path / "back.bin"
    shell.get(r"C:\evals\blob.bin", back)
    assert back.read_bytes() == local.read_bytes()


def test_wait_ready_rides_out_a_starting_service(server):
    server.fail_first = [503, 503, 503]
    waited = shell_for(server).wait_ready(timeout=30)
    assert waited >= 2 and server.fail_first == []


def test_wrong_credentials_fail_at_once_not_at_the_deadline(server):
    started = time.monotonic()
    with pytest.raises(GuestUnreachable, match="refused for good"):
        shell_for(server, password="wrong").wait_ready(timeout=60)
    assert time.monotonic() - started < 10


def test_an_unreachable_guest_is_a_guest_unreachable_at_the_deadline():
    with pytest.raises(GuestUnreachable, match="did not answer within 2 s"):
        WinRmShell("127.0.0.1", 9, "cu", "x", transport="basic").wait_ready(timeout=2)


def transport_error(code, text=""):
    return WinRMTransportError("http", code, text)


@pytest.mark.parametrize("exc, transient", [
    (requests.exceptions.ConnectionError("refused"), True),
    (requests.exceptions.ReadTimeout("slow"), True),
    (WinRMOperationTimeoutError(), True),
    (ConnectionResetError(), True),
    (transport_error(503), True),
    (transport_error(500, "starting"), True),
    (transport_error(500, "<s:Fault>bad request</s:Fault>"), False),
    (transport_error(401), False),
    (InvalidCredentialsError("no"), False),
    (ValueError("bug"), False),
])
def test_transient_or_permanent(exc, transient):
    assert is_transient_winrm_error(exc) is transient


def test_a_windows_verifier_runs_as_the_admin_with_its_files_staged(server):
    """windows-core's find-and-fix verifier over WinRM, as the verifier account: files staged under
    C:\\cu-run\\staging\\task (inheritance off, only the staging account and SYSTEM), the desktop user's home and SID
    given, the scripts' working folder the system folder (never one the desktop user can write)."""
    from runner.images.catalog import DesktopUser
    from runner.tasks.scripts import run_privileged
    from runner.tasks.model import load_suite

    (task,) = load_suite("windows-core").select(["find-and-fix"])
    seen = {}

    def guest(script):
        if "icacls $Folder /inheritance:r" in script and "-Folder 'C:\\cu-run\\staging\\task'" in script:
            seen["acl"] = script
        if "Set-Location -LiteralPath $env:SystemRoot" in script:
            seen["script"] = script
            seen["staged"] = sorted(server.files)
            return Reply(b"PASS\r\n")
        return Reply()

    server.handler = guest
    result = run_privileged(shell_for(server), task, "verify", DesktopUser("cu", "C:\\Users\\cu"), "verify")
    assert result.stdout == "PASS\r\n"
    # guest_agent/windows/privileged-prelude.ps1, given the staging folder and the desktop user
    assert "\r\n} -TaskDir 'C:\\cu-run\\staging\\task' -UserHome 'C:\\Users\\cu' -DesktopUser 'cu'\r\n" in seen["script"]
    assert "$env:TASK_DIR = $TaskDir" in seen["script"] and "$env:USER_HOME = $UserHome" in seen["script"]
    assert "$env:DESKTOP_USER_SID" in seen["script"] and "acl" in seen
    assert seen["script"].endswith(task.script("verify").read_text())
    assert "C:\\cu-run\\staging\\task\\config.ps1" in seen["staged"] and "C:\\cu-run\\staging\\task\\verify.ps1" in seen["staged"]


def test_a_windows_verifiers_recorded_verdict_is_read_back_before_its_folder_goes(server):
    """Over WinRM the script runs apart from staging: the helper's record is read by a command of
    its own, after the script and before the folder is removed, and wins over a forged stdout."""
    from runner.images.catalog import DesktopUser
    from runner.scoring.verdict import parse_verdict
    from runner.tasks.model import load_suite
    from runner.tasks.scripts import run_verifier

    (task,) = load_suite("windows-core").select(["find-and-fix"])
    order = []

    def guest(script):
        if "function Verdict" in script:
            order.append("verify")
            return Reply(b"FAIL holds: x\r\nPASS\r\n")  # agent text forging a PASS on stdout
        if ".cu-verdict-" in script and "Test-Path" in script and "Write-Output 'fail'" in script:
            order.append("read")
            return Reply(b"fail\r\nthe decoy was changed\r\n")
        if "Remove-Item -LiteralPath $Folder -Recurse" in script and "-Folder 'C:\\cu-run\\staging\\task'" in script \
                and "function Verdict" not in script:
            order.append("remove")
        return Reply()

    server.handler = guest
    ran = run_verifier(shell_for(server), task, "verify", DesktopUser("cu", "C:\\Users\\cu"))
    assert order[-3:] == ["verify", "read", "remove"]
    verdict = parse_verdict(ran.result.stdout, ran.result.exit_code, ran.recorded)
    assert (verdict.kind, verdict.reason, verdict.channel) == ("fail", "the decoy was changed", "helper")


def test_the_powershell_verdict_helper_and_its_read_back_parse():
    from runner.profiles.windows import windows_profile
    from runner.tasks.syntax import powershell_errors

    profile = windows_profile()
    record = "C:\\cu-run\\staging\\task\\.cu-verdict-00"
    for text in (profile.scripts.verdict_helper(record) + "Verdict fail 'x y'\r\n", profile.scripts.verdict_read_script(record),
                 profile.scripts.verdict_trailer(record, "cu-run-verdict-00")):
        assert powershell_errors(text.encode()) == [], text


# -- the production transport and the service's RootSDDL

def production_server(root_sddl):
    """The accounts of a built image: the desktop user is a standard user in Remote Management
    Users, the verifier account an administrator."""
    return FakeWsmanServer(accounts={"cu": "user-pw", "cu-verify": "admin-pw"}, root_sddl=root_sddl,
                           groups={"cu": {"Users", "Remote Management Users"}, "cu-verify": {"Administrators"}})


def test_every_message_travels_sealed_over_ntlm(server):
    shell_for(server).run("Write-Output hello")
    assert server.encrypted_requests > 0 and server.plain_requests == 0


def test_the_desktop_user_opens_its_shell_when_the_image_admits_remote_management_users():
    server = production_server(provisioned_sddl())
    server.handler = lambda text: Reply(b"from the user's shell\r\n")
    try:
        shell = WinRmShell("127.0.0.1", server.port, "cu", "user-pw")
        shell.wait_ready(timeout=20)
        assert shell.run("Write-Output x").stdout == "from the user's shell\r\n"
    finally:
        server.close()


def test_windows_default_sddl_refuses_the_desktop_user_and_says_why_at_once():
    server = production_server(DEFAULT_ROOT_SDDL)
    try:
        started = time.monotonic()
        with pytest.raises(GuestUnreachable) as refused:
            WinRmShell("127.0.0.1", server.port, "cu", "user-pw").wait_ready(timeout=60)
        assert "not allowed by the guest's WinRM SDDL" in refused.value.message
        assert time.monotonic() - started < 10
        WinRmShell("127.0.0.1", server.port, "cu-verify", "admin-pw").wait_ready(timeout=20)  # the admin is admitted
    finally:
        server.close()


def test_the_fakes_provisioned_sddl_comes_from_the_real_script(tmp_path):
    text = ENABLE_WINRM.read_text()
    assert "(A;;GXGR;;;RM)" in provisioned_sddl()
    stripped = tmp_path / "enable-winrm.ps1"
    stripped.write_text(text.replace("$descriptor.DiscretionaryAcl.AddAccess", "# removed: "))
    assert provisioned_sddl(stripped) == DEFAULT_ROOT_SDDL
    assert sddl_admits(provisioned_sddl(), {"Remote Management Users"})
    assert not sddl_admits(DEFAULT_ROOT_SDDL, {"Remote Management Users"})


def test_output_past_the_cap_ends_the_read_with_its_reason(server, monkeypatch):
    from runner.errors import OutputTooLarge
    monkeypatch.setattr("runner.guest.winrm.MAX_OUTPUT_BYTES", 64 * 1024)
    server.handler = lambda text: Reply(b"x" * 200_000)
    with pytest.raises(OutputTooLarge, match="the read was ended"):
        shell_for(server).run("Write-Output lots")
