"""The Windows profile's scripts are programs in guest_agent/windows (issue 52, item 2), sent with
their parameters filled in: the preludes, staging, the verdict helper and its read-back, the
quarantine and the MCP file tools. PowerShell does not run here: each program is parsed, its
arguments are read back from the text the runner sends, and each parameter given is one its
param block declares."""

import re

import pytest

from test_windows_walks import NASTY, PROGRAMS, arguments

from runner.guest.powershell_quote import ps_quote
from runner.guest.programs import program_text, ps_literal, ps_program
from runner.profiles import DesktopUser, get_profile
from runner.profiles.windows import MAX_RECORD_CHARS, START_IN_SESSION
from runner.tasks.guest_lint import runs_as
from runner.tasks.syntax import powershell_errors, powershell_mistakes, script_errors
from runner.profiles.parts import FileTools, Quarantine

WINDOWS = get_profile("windows")
USER = DesktopUser("cu", "C:\\Users\\cu")
STAGING = "C:\\cu-run\\staging\\task"
RECORD = STAGING + "\\.cu-verdict-00"


def sent(user: DesktopUser = USER, folder: str = STAGING, root: str = "C:\\Users\\cu") -> list[tuple]:
    """(what the runner sends, the program, how it is called, the arguments it must carry)."""
    return [
        (WINDOWS.scripts.privileged_prelude(folder, user, "verify"), "privileged-prelude.ps1", "&",
         {"TaskDir": folder, "UserHome": user.home, "DesktopUser": user.name}),
        (WINDOWS.scripts.agent_prelude(folder), "agent-prelude.ps1", "&", {"TaskDir": folder}),
        (WINDOWS.scripts.stage_script(folder, ["a", "b/c"]), "stage.ps1", "&",
         {"Folder": folder, "Subfolders": (folder + "\\a", folder + "\\b\\c")}),
        (WINDOWS.scripts.stage_script(folder, []), "stage.ps1", "&", {"Folder": folder, "Subfolders": ()}),
        (WINDOWS.scripts.verdict_helper(folder + "\\.cu-verdict-00"), "verdict.ps1", ".",
         {"CuRunVerdict": folder + "\\.cu-verdict-00"}),
        (WINDOWS.scripts.verdict_trailer(RECORD, "cu-run-verdict-00"), "verdict-record.ps1", "&",
         {"Record": RECORD, "Boundary": "cu-run-verdict-00", "MaxChars": str(MAX_RECORD_CHARS)}),
        (WINDOWS.scripts.verdict_read_script(RECORD), "verdict-record.ps1", "&",
         {"Record": RECORD, "Boundary": "", "MaxChars": str(MAX_RECORD_CHARS)}),
        (WINDOWS.part(Quarantine).quarantine_script(user, frozenset({"8:2", "4:1"})), "quarantine.ps1", "&",
         {"UserName": user.name, "Keep": ("4:1", "8:2")}),
        (WINDOWS.part(Quarantine).quarantine_script(user, None), "quarantine.ps1", "&", {"UserName": user.name, "Keep": ()}),
        (WINDOWS.part(FileTools).list_files_script(root + "\\", root + "\\x"), "list-files.ps1", "&",
         {"Root": root, "Target": root + "\\x"}),
        (WINDOWS.part(FileTools).read_file_script(root, root + "\\x", 10), "read-file.ps1", "&",
         {"Root": root, "Target": root + "\\x", "MaxBytes": "10"}),
        (WINDOWS.scripts.remove_script(folder), "remove.ps1", "&", {"Folder": folder}),
        (WINDOWS.scripts.grant_admin_script(user), "grant-admin.ps1", "&", {"UserName": user.name}),
        (WINDOWS.scripts.clock_script(1.5e9), "set-clock.ps1", "&", {"UnixMilliseconds": "1500000000000"}),
        (WINDOWS.part(Quarantine).processes_script(user), "processes.ps1", "&", {"UserName": user.name}),
    ]


def declared(name: str) -> list[str]:
    """The parameters the program's param block declares, in order."""
    text = (PROGRAMS / name).read_text()
    start = re.search(r"^param\(", text, re.MULTILINE)
    assert start, f"{name} has no param block"
    depth, end = 0, start.end() - 1
    for end in range(start.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        if depth == 0:
            break
    return re.findall(r"\[\w+(?:\[\])?\]\$(\w+)", text[start.end():end])


@pytest.mark.parametrize(("script", "name", "call", "wanted"), sent(), ids=[f"{n}-{i}" for i, (_, n, _, _) in enumerate(sent())])
def test_each_script_is_its_program_called_with_the_parameters_it_declares(script, name, call, wanted):
    assert arguments(script, name, call) == wanted
    assert list(wanted) == declared(name)
    assert powershell_errors(script.encode()) == []


@pytest.mark.parametrize("name", ["privileged-prelude.ps1", "in-session.ps1", "agent-prelude.ps1", "stage.ps1",
                                  "verdict.ps1", "verdict-record.ps1", "quarantine.ps1", "list-files.ps1",
                                  "read-file.ps1", "winrm-prelude.ps1", "remove.ps1", "grant-admin.ps1",
                                  "set-clock.ps1", "processes.ps1"])
def test_the_programs_parse_say_who_runs_them_and_fall_into_no_known_trap(name):
    assert script_errors(PROGRAMS / name) == []
    assert powershell_mistakes((PROGRAMS / name).read_text()) == []
    who = runs_as((PROGRAMS / name).read_text(), powershell=True)
    assert who == ("desktop user" if name in ("agent-prelude.ps1", "list-files.ps1", "read-file.ps1")
                   else "verifier account")


def test_no_value_breaks_out_of_the_parameters():
    user = DesktopUser("o'brien\u2019 " + NASTY, "C:\\Users\\" + NASTY)
    for script, name, call, wanted in sent(user, "C:\\cu-run\\" + NASTY, "C:\\Users\\" + NASTY):
        assert arguments(script, name, call) == wanted
        assert powershell_errors(script.encode()) == []


def test_setup_alone_gets_start_in_session_as_the_file_holds_it():
    verify = WINDOWS.scripts.privileged_prelude(STAGING, USER, "verify")
    setup = WINDOWS.scripts.privileged_prelude(STAGING, USER, "setup")
    assert setup == verify + program_text("windows/in-session.ps1")
    assert "Start-InSession" not in verify
    # The image's helper, where packer/windows-11/session/ puts it
    assert f"& {ps_quote(START_IN_SESSION)} -User $env:DESKTOP_USER -FilePath $FilePath" in setup
    assert powershell_errors(setup.encode()) == []


def test_the_verdict_helper_defines_verdict_in_the_scripts_own_scope():
    """Dot-sourced: Verdict, defined in the block, is the script's after it, and reads the record's
    path from the parameter that stays."""
    helper = WINDOWS.scripts.verdict_helper(RECORD)
    assert helper.startswith(". {\r\n") and "\r\n} -CuRunVerdict " in helper
    text = (PROGRAMS / "verdict.ps1").read_text()
    assert "function Verdict {" in text and "exit 0" in text
    assert "($CuRunVerdict + '.fail')" in text and "($CuRunVerdict + '.pass', '')" in text
    script = WINDOWS.scripts.privileged_prelude(STAGING, USER, "verify") + helper + "Verdict fail 'x y'\r\n"
    assert powershell_errors(script.encode()) == []


def test_the_quarantine_stops_the_console_shells_whatever_ran_before():
    text = (PROGRAMS / "quarantine.ps1").read_text()
    assert "$shells = @('cmd', 'powershell', 'pwsh', 'WindowsTerminal', 'OpenConsole', 'bash', 'wsl')" in text
    assert "$owner = '*\\' + $UserName" in text and "foreach ($round in 1..20)" in text


def test_a_program_call_is_the_files_text_and_literals():
    assert ps_program("windows/agent-prelude.ps1", TaskDir="C:\\x") == (
        "& {\r\n" + program_text("windows/agent-prelude.ps1") + "\r\n} -TaskDir 'C:\\x'\r\n")
    assert ps_program("windows/verdict.ps1", dot_sourced=True, CuRunVerdict="a").startswith(". {\r\n")
    assert ps_literal("it's") == "'it''s'" and ps_literal("") == "''"
    assert ps_literal("a\u2019\n") == "('a' + [char]0x2019 + [char]0x000A)"
