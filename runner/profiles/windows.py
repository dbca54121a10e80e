"""The windows profile: a Windows 11 desktop reached over WinRM, task scripts in PowerShell.

The desktop user (autologon) is a standard user; the admin is the separate verifier
account the image's provisioning made. Privileged scripts are staged in C:\\cu-run\\staging\\task with
inheritance off, so only the staging account and SYSTEM can read them. Whole sessions
cannot be frozen, so before verification the desktop user's processes started during the
episode are stopped. The write-set lister is runner.profiles.windows_listing's, what
`tasks lint` says of PowerShell is runner.profiles.windows_lint's.

What runs in the guest is files under guest_agent/windows, each saying in its header what it does,
as whom, and its parameters; the methods here fill those in (runner.guest.programs: ps_program).
"""

from __future__ import annotations

import ntpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runner.errors import InfraError
from runner.guest.powershell_quote import ps_quote as _ps
from runner.guest.programs import program_text, ps_program
from runner.guest.winrm import WinRmShell
from runner.profiles.base import GuestProfile
from runner.profiles.listing import expand, pruned_folders
from runner.profiles.parts import (
    DesktopUser,
    FileTools,
    Phase,
    Probes,
    Quarantine,
    ShellAccess,
    ShellEndpoint,
    Shells,
    TaskScripts,
)
from runner.profiles.windows_lint import WindowsScriptLint
from runner.profiles.windows_listing import WindowsLister
from runner.profiles.windows_network import WindowsNetworkEnd
from typing_extensions import override

if TYPE_CHECKING:
    from runner.guest.qga import AgentLink
    from runner.profiles.manifest import ImageFiles, WinRmAccess


def _winrm(manifest) -> WinRmAccess:
    """The image's WinRM access; access_problem() refused an image without it when it was loaded."""
    if manifest.winrm is None:
        raise InfraError(f"image {manifest.name} has no WinRM access in its manifest")
    return manifest.winrm


PROFILE_NAME = "windows"  # what an image's manifest and a task say to have this guest
START_IN_SESSION = "C:\\cu-run\\session\\start-in-session.ps1"  # the image's (packer/windows-11/session/)
# Guest programs are sent whole with each call, read from the package: the image's copies (in
# C:\cu-run\guest-agent; an image built before issue 51 let the desktop user write there) are never run.
MAX_RECORD_CHARS = 4096  # of a recorded FAIL reason read back: it may hold agent data of any size


class WindowsAccess(ShellAccess):
    """WinRM for both: the desktop user's account, and the separate verifier account."""

    # WinRM starts Automatic (Delayed Start) (setup/enable-winrm.ps1): the service control manager
    # starts it about two minutes after the other automatic services, delayed services one at a time
    # at the lowest priority, with no time guaranteed (MS-SCMR, SERVICE_DELAYED_AUTO_START_INFO).
    # A cold boot gets a boot's own time, that delay, and room for load to stretch both.
    boot_shell_timeout = 600.0

    @override
    def home(self, user: str) -> str:
        return f"C:\\Users\\{user}"

    @override
    def access_problem(self, manifest) -> str | None:
        if manifest.winrm is None or manifest.firmware is None:
            return "a windows image needs 'winrm' and 'firmware'"
        return None

    @override
    def admin_access_missing(self, manifest) -> str | None:
        if manifest.winrm.admin_user is None or manifest.winrm.admin_password is None:
            return "it predates the separate verifier account (no admin_user in its manifest)"
        return None

    @override
    def shell_port(self, manifest) -> int:
        return _winrm(manifest).port

    @override
    def open_shells(self, image: ImageFiles, host: str, port: int, agent: AgentLink | None = None) -> Shells:
        # WinRM is the Windows admin channel (the design's verifier transport), agent or not.
        winrm = _winrm(image.manifest)
        if winrm.admin_user is None or winrm.admin_password is None:
            raise InfraError(f"image {image.name} has no verifier account", fix=f"rebuild it: cu-run image build {image.name}")
        return Shells(user=WinRmShell(host, port, winrm.user, winrm.password, transport=winrm.transport),
                      admin=WinRmShell(host, port, winrm.admin_user, winrm.admin_password, transport=winrm.transport))

    @override
    def endpoint(self, image: ImageFiles, host: str, port: int) -> ShellEndpoint:
        user = _winrm(image.manifest).user
        return ShellEndpoint("winrm", {"host": host, "port": port, "user": user, "endpoint": f"http://{host}:{port}/wsman"},
                             f"WinRM http://{host}:{port}/wsman as {user} (password in the image manifest)")


class WindowsScripts(TaskScripts):
    """PowerShell, each script's files copied one by one into its staging folder."""

    script_ext = ".ps1"
    # Inside C:\cu-run\staging, which the image makes for administrators alone (install-guest-agent.ps1):
    # the folder is made anew per script where the desktop user can have put nothing first.
    admin_task_dir = "C:\\cu-run\\staging\\task"
    agent_task_dir = "C:\\cu-oracle"

    @override
    def privileged_prelude(self, folder: str, user: DesktopUser, phase: Phase) -> str:
        # Start-InSession (in-session.ps1) for setup alone: nothing runs as the user during verification.
        prelude = ps_program("windows/privileged-prelude.ps1", TaskDir=folder, UserHome=user.home,
                             DesktopUser=user.name)
        return prelude + (program_text("windows/in-session.ps1") if phase == "setup" else "")

    @override
    def agent_prelude(self, folder: str) -> str:
        return ps_program("windows/agent-prelude.ps1", TaskDir=folder)

    @override
    def stage_script(self, folder: str, subfolders: list[str]) -> str:
        return ps_program("windows/stage.ps1", Folder=folder,
                          Subfolders=tuple(folder + "\\" + d.replace("/", "\\") for d in subfolders))

    @override
    def remove_script(self, folder: str) -> str:
        return ps_program("windows/remove.ps1", Folder=folder)

    @override
    def staged_path(self, folder: str, relative: str) -> str:
        return folder + "\\" + relative.replace("/", "\\")

    @override
    def verdict_helper(self, record: str) -> str:
        # Dot-sourced: Verdict is defined for the script that follows.
        return ps_program("windows/verdict.ps1", dot_sourced=True, CuRunVerdict=record)

    @override
    def verdict_trailer(self, record: str, boundary: str) -> str:
        return ps_program("windows/verdict-record.ps1", Record=record, Boundary=boundary, MaxChars=MAX_RECORD_CHARS)

    @override
    def verdict_read_script(self, record: str) -> str:
        return ps_program("windows/verdict-record.ps1", Record=record, Boundary="", MaxChars=MAX_RECORD_CHARS)

    @override
    def hand_home_script(self, user: DesktopUser) -> str:
        # guest_agent/windows/hand-home.ps1: only what setup made is re-owned. It enters none of
        # the folders whose items default_ignore covers (AppData: tens of thousands of items after
        # the first logon), so what setup made deeper keeps its admin owner. The user can still
        # use it: a file or folder made with no security descriptor of its own gets its parent's
        # inheritable ACEs (learn.microsoft.com/windows/win32/secauthz/security-descriptors-for-
        # new-objects and .../ace-inheritance-rules), and a profile folder grants its user, SYSTEM
        # and Administrators full control, inherited by folders and files ((OI)(CI)F). What setup
        # moved there from a folder of other ACLs keeps its own, but re-owning never helped that:
        # an owner gains only WRITE_DAC (.../owner-of-a-new-object). The programs known to look
        # at an owner (git's safe.directory, OpenSSH's key files) look at folders outside AppData.
        ignored = tuple(expand(p, user.home) for p in WindowsLister.default_ignore)
        return ps_program("windows/hand-home.ps1", HomeFolder=user.home, UserName=user.name,
                          Pruned=pruned_folders(ignored, windows=True))

    @override
    def grant_admin_script(self, user: DesktopUser) -> str:
        return ps_program("windows/grant-admin.ps1", UserName=user.name)

    @override
    def clock_script(self, now: float) -> str:
        return ps_program("windows/set-clock.ps1", UnixMilliseconds=int(now * 1000))

    @override
    def sync_script(self) -> str:
        return "Write-VolumeCache -DriveLetter C"  # needs an administrator: run on the admin channel

    @override
    def quote_arguments(self, args: Sequence[str]) -> str:
        return " ".join(_ps(a) for a in args)


class WindowsQuarantine(Quarantine):
    """The desktop user's processes started during the episode stopped (a session cannot be frozen)."""

    spares_earlier_processes = True

    @override
    def processes_script(self, user: DesktopUser) -> str:
        return ps_program("windows/processes.ps1", UserName=user.name)

    @override
    def quarantine_script(self, user: DesktopUser, keep: frozenset[str] | None) -> str:
        return ps_program("windows/quarantine.ps1", UserName=user.name, Keep=tuple(sorted(keep or ())))


class WindowsFileTools(FileTools):
    @override
    def confine(self, root: str, path: str) -> str:
        root = ntpath.normpath(root)
        target = ntpath.normpath(ntpath.join(root, path.replace("/", "\\")))
        if target.lower() != root.lower() and not target.lower().startswith(root.lower() + "\\"):
            raise ValueError(f"{path} leads outside {root}")
        return target

    @override
    def list_files_script(self, root: str, target: str) -> str:
        return ps_program("windows/list-files.ps1", Root=ntpath.normpath(root), Target=target)

    @override
    def read_file_script(self, root: str, target: str, max_bytes: int) -> str:
        return ps_program("windows/read-file.ps1", Root=ntpath.normpath(root), Target=target, MaxBytes=max_bytes)


class WindowsProbes(Probes):
    @override
    def selfcheck_probe(self) -> tuple[str, str]:
        return "[Environment]::OSVersion.VersionString", "Windows"

    @override
    def selfcheck_failing(self) -> str:
        return "[Console]::Error.WriteLine('to-stderr'); exit 3"

    @override
    def selfcheck_sleep(self) -> tuple[str, str]:
        return ("Start-Sleep -Seconds 60",
                "Get-CimInstance Win32_Process -Filter \"Name='powershell.exe'\" | "
                "Where-Object { $_.CommandLine -like '*Start-Sleep -Seconds 60*' } | ForEach-Object { $_.ProcessId }")

    @override
    def selfcheck_hash(self, path: str) -> str:
        return f"(Get-FileHash -LiteralPath {_ps(path)} -Algorithm SHA256).Hash.ToLower()"

    @override
    def selfcheck_temp_path(self) -> str:
        return "C:\\Windows\\Temp\\cu-roundtrip.bin"

    @override
    def typing_line(self, text: str, path: str) -> str:
        return f"Set-Content -LiteralPath {_ps(path)} -Value {_ps(text)}\n"

    @override
    def read_text_script(self, path: str) -> str:
        return f"Get-Content -LiteralPath {_ps(path)} -Raw -ErrorAction SilentlyContinue"

    @override
    def count_items_script(self, folder: str) -> str:
        return (f"(Get-ChildItem -LiteralPath {_ps(folder)} -Recurse -Force -ErrorAction SilentlyContinue | "
                "Measure-Object).Count\r\n")


def windows_profile() -> GuestProfile:
    """The windows guest: no warm-up; its network end is runner.profiles.windows_network's."""
    return GuestProfile(PROFILE_NAME, default_image="windows-11", access=WindowsAccess(), scripts=WindowsScripts(),
                        parts=(WindowsLister(), WindowsQuarantine(), WindowsNetworkEnd(), WindowsFileTools(),
                               WindowsProbes(), WindowsScriptLint()), windows_paths=True)
