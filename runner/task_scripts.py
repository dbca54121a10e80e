"""Running a task's scripts in the guest, each as the account its role calls for.

What decides the score runs privileged: setup, verify, checkpoints and safety checks go
through the admin channel (root on Linux, a separate administrator on Windows), with a
clean environment, from a folder the desktop user can neither read nor write. The agent
is the desktop user and can change anything that user owns (rc files, ~/bin, its SSH
keys), so nothing of that user's may take part. The oracle is the agent: it runs as the
desktop user, like any agent would.

The task's files travel into the guest just before a script runs and are removed right
after. What a privileged script sees:

    USER_HOME     the desktop user's home (/home/cu, C:\\Users\\cu)
    DESKTOP_USER  the desktop user's name
    TASK_DIR      the task's files
    HOME          the admin account's own home: never the desktop user's, whose files are the agent's
    as_user CMD   (Linux) runs CMD as the desktop user with a clean environment; during
                  verification inside a cgroup that is killed when CMD returns, so nothing
                  the user's files start outlives the call

The working folder is USER_HOME. After setup, whatever setup left in USER_HOME belongs to
the desktop user (the agent must be able to change the files the task gives it).
"""

from __future__ import annotations

import shlex
from typing import Literal

from runner.catalog import DesktopUser
from runner.errors import InfraError
from runner.guest.base import ExecResult, GuestShell
from runner.tasks import Task

SCRIPT_TIMEOUT = 180.0
ADMIN_TASK_DIR = "/run/cu-task"  # tmpfs, root's, 0700
WINDOWS_TASK_DIR = "C:\\cu-task"
# The admin channel's whole environment (env -i): no PATH entry a user can write to.
LINUX_ADMIN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

Phase = Literal["setup", "verify"]


def run_privileged(admin: GuestShell, task: Task, kind: str, user: DesktopUser, phase: Phase,
                   timeout: float = SCRIPT_TIMEOUT) -> ExecResult | None:
    """Runs the task's KIND script (setup, verify, checkpoints/NAME, safety/NAME) through the
    admin channel; None when the task has none. Raises CommandTimeout past TIMEOUT and
    GuestUnreachable when the guest is gone."""
    script = task.script(kind)
    if script is None:
        return None
    windows = task.spec.profile == "windows"
    folder = WINDOWS_TASK_DIR if windows else ADMIN_TASK_DIR
    _stage(admin, task, folder, windows)
    try:
        prelude = _windows_prelude(folder, user) if windows else _linux_prelude(folder, user, phase)
        return admin.run(prelude + script.read_text(), timeout=timeout)
    finally:
        _remove(admin, folder, windows)


def run_as_agent(shell: GuestShell, task: Task, kind: str, timeout: float = SCRIPT_TIMEOUT) -> ExecResult | None:
    """Runs KIND (the oracle) through the desktop user's own shell: the agent's privileges."""
    script = task.script(kind)
    if script is None:
        return None
    windows = task.spec.profile == "windows"
    folder = WINDOWS_TASK_DIR if windows else "/tmp/.cu-oracle"
    _stage(shell, task, folder, windows)
    try:
        if windows:
            prelude = f"$env:TASK_DIR = '{folder}'\r\nSet-Location -LiteralPath $env:USERPROFILE\r\n"
        else:
            prelude = f"TASK_DIR={shlex.quote(folder)}; export TASK_DIR; cd \"$HOME\"\n"
        return shell.run(prelude + script.read_text(), timeout=timeout)
    finally:
        _remove(shell, folder, windows)


def hand_home_to_user(admin: GuestShell, task: Task, user: DesktopUser) -> None:
    """After a setup run as the admin: what it made in the user's home is the user's."""
    if task.spec.profile == "windows":
        script = (f"$home = '{user.home}'\r\nGet-ChildItem -LiteralPath $home -Recurse -Force -ErrorAction "
                  f"SilentlyContinue | ForEach-Object {{ icacls $_.FullName /setowner '{user.name}' /q | Out-Null }}\r\n")
    else:
        script = (f"find {shlex.quote(user.home)} -xdev -user 0 -exec chown -h "
                  f"{shlex.quote(user.name)}: {{}} +\n")
    result = admin.run(script, timeout=60)
    if not result.ok:
        raise InfraError(f"could not give what setup made in {user.home} to {user.name}: {result.stderr.strip()[-300:]}")


def grant_admin(admin: GuestShell, task: Task, user: DesktopUser) -> None:
    """For a task with agent_privileges: admin, the desktop user gets admin rights for this episode
    (passwordless sudo; on Windows, Administrators, which a new logon of the user picks up)."""
    if task.spec.profile == "windows":
        script = f"Add-LocalGroupMember -Group 'Administrators' -Member '{user.name}' -ErrorAction SilentlyContinue\r\n"
    else:
        script = (f"umask 0337; echo {shlex.quote(user.name + ' ALL=(ALL) NOPASSWD: ALL')} > /etc/sudoers.d/cu-run-agent\n"
                  "visudo -cq -f /etc/sudoers.d/cu-run-agent\n")
    result = admin.run(script, timeout=30)
    if not result.ok:
        raise InfraError(f"could not give {user.name} admin rights: {result.stderr.strip()[-300:]}")


def _linux_prelude(folder: str, user: DesktopUser, phase: Phase) -> str:
    q = shlex.quote
    user_env = (f"env -i HOME={q(user.home)} USER={q(user.name)} LOGNAME={q(user.name)} "
                "PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8")
    if phase == "setup":
        # Before the agent the guest is as the image made it: what setup starts may stay.
        as_user = f'as_user() {{ runuser -u "$DESKTOP_USER" -- {user_env} "$@"; }}\n'
    else:
        # During verification the user's files are the agent's: what they start is killed
        # with its cgroup (cgroup.kill reaches double-forked daemons too).
        as_user = (
            "as_user() {\n"
            "    _cg=/sys/fs/cgroup/cu-run-as-user-$$\n"
            "    mkdir -p \"$_cg\" || return 125\n"
            "    sh -c 'echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"' as_user \"$_cg\" "
            f"runuser -u \"$DESKTOP_USER\" -- {user_env} \"$@\"\n"
            "    _status=$?\n"
            "    echo 1 > \"$_cg/cgroup.kill\"\n"
            "    for _ in $(seq 100); do [ -s \"$_cg/cgroup.procs\" ] || break; sleep 0.05; done\n"
            "    rmdir \"$_cg\" 2>/dev/null\n"
            "    return $_status\n"
            "}\n")
    return (f"TASK_DIR={q(folder)}; USER_HOME={q(user.home)}; DESKTOP_USER={q(user.name)}\n"
            "export TASK_DIR USER_HOME DESKTOP_USER\n"
            f"{as_user}"
            'cd "$USER_HOME" || exit 125\n')


def _windows_prelude(folder: str, user: DesktopUser) -> str:
    return (f"$env:TASK_DIR = '{folder}'\r\n$env:USER_HOME = '{user.home}'\r\n$env:DESKTOP_USER = '{user.name}'\r\n"
            f"$env:DESKTOP_USER_SID = (New-Object System.Security.Principal.NTAccount('{user.name}')).Translate("
            "[System.Security.Principal.SecurityIdentifier]).Value\r\n"
            "Set-Location -LiteralPath $env:USER_HOME\r\n")


def _stage(shell: GuestShell, task: Task, folder: str, windows: bool) -> None:
    """Copies the task's files to FOLDER, made afresh and readable only by the shell's own account."""
    files = task.files()
    folders = sorted({str(p.parent.relative_to(task.folder)) for p in files} - {"."})
    if windows:
        made = "".join(f"New-Item -ItemType Directory -Force -Path '{folder}\\{d.replace('/', chr(92))}'"
                       " | Out-Null\r\n" for d in folders)
        # Only the account that staged it (and SYSTEM) may read the folder: inheritance off.
        shell.run(f"Remove-Item -LiteralPath '{folder}' -Recurse -Force -ErrorAction SilentlyContinue\r\n"
                  f"New-Item -ItemType Directory -Force -Path '{folder}' | Out-Null\r\n"
                  f"icacls '{folder}' /inheritance:r /grant:r \"$($env:USERNAME):(OI)(CI)F\" "
                  "'SYSTEM:(OI)(CI)F' | Out-Null\r\n"
                  f"{made}", timeout=30)
        for path in files:
            shell.put(path, folder + "\\" + str(path.relative_to(task.folder)).replace("/", "\\"))
        return
    mkdirs = " ".join(shlex.quote(f"{folder}/{d}") for d in folders)
    made = shell.run(f"umask 077; rm -rf {folder} && mkdir -m 0700 {folder} && mkdir -p {folder} {mkdirs}", timeout=30)
    if not made.ok:
        raise InfraError(f"could not make {folder} in the guest to stage the task's files: "
                         f"{made.stderr.strip()[-300:]}")
    for path in files:
        shell.put(path, f"{folder}/{path.relative_to(task.folder)}")


def _remove(shell: GuestShell, folder: str, windows: bool) -> None:
    shell.run(f"Remove-Item -LiteralPath '{folder}' -Recurse -Force -ErrorAction SilentlyContinue"
              if windows else f"rm -rf {folder}", timeout=30)
