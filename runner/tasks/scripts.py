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

from collections.abc import Callable

from runner.errors import CommandTimeout, InfraError
from runner.guest.base import ExecResult, GuestShell
from runner.profiles import DesktopUser, Phase
from runner.profiles.base import STAGING_FAILED, STAGING_FAILED_EXIT
from runner.scoring.writeset import Listing, step_then_list, take_listing
from runner.tasks.model import Task

SCRIPT_TIMEOUT = 180.0


def run_privileged(admin: GuestShell, task: Task, kind: str, user: DesktopUser, phase: Phase,
                   timeout: float = SCRIPT_TIMEOUT) -> ExecResult | None:
    """Runs the task's KIND script (setup, verify, checkpoints/NAME, safety/NAME) through the
    admin channel; None when the task has none. Raises CommandTimeout past TIMEOUT and
    GuestUnreachable when the guest is gone."""
    guest = task.guest
    return _run_staged(admin, task, kind, guest.admin_task_dir,
                       lambda folder: guest.privileged_prelude(folder, user, phase), timeout)


def run_as_agent(shell: GuestShell, task: Task, kind: str, timeout: float = SCRIPT_TIMEOUT) -> ExecResult | None:
    """Runs KIND (the oracle) through the desktop user's own shell: the agent's privileges."""
    return _run_staged(shell, task, kind, task.guest.agent_task_dir, task.guest.agent_prelude, timeout)


def _run_staged(shell: GuestShell, task: Task, kind: str, folder: str, prelude: Callable[[str], str],
                timeout: float) -> ExecResult | None:
    """Stages the task's files in FOLDER, runs KIND after PRELUDE(FOLDER), removes FOLDER whatever happened."""
    script = task.script(kind)
    if script is None:
        return None
    text = prelude(folder) + script.read_text()
    files = {str(p.relative_to(task.folder).as_posix()): p.read_bytes() for p in task.files()}
    one_command = task.guest.staged_run_script(folder, files, text)
    if one_command is None:
        _stage(shell, task, folder)
        try:
            return shell.run(text, timeout=timeout)
        finally:
            shell.run(task.guest.remove_script(folder), timeout=30)
    try:
        result = shell.run(one_command, timeout=timeout)
    except CommandTimeout:
        shell.run(task.guest.remove_script(folder), timeout=30)  # killed before it could remove them
        raise
    if result.exit_code == STAGING_FAILED_EXIT and STAGING_FAILED in result.stderr:
        raise InfraError(f"{STAGING_FAILED} in {folder}: {result.stderr.strip()[-300:]}")
    return result


def hand_home_to_user(admin: GuestShell, task: Task, user: DesktopUser) -> None:
    """After a setup run as the admin: what it made in the user's home is the user's."""
    _admin_step(admin, task.guest.hand_home_script(user), _hand_home_what(user))


def hand_home_then_list(admin: GuestShell, task: Task, user: DesktopUser, roots: tuple[str, ...]) -> Listing:
    """hand_home_to_user(), then the write-set listing of ROOTS, in one guest command where the
    profile can chain them (writeset.step_then_list)."""
    chained = step_then_list(admin, task.guest, task.guest.hand_home_script(user),
                             _hand_home_what(user), ADMIN_STEP_TIMEOUT, roots)
    if chained is None:
        hand_home_to_user(admin, task, user)
        return take_listing(admin, task.guest, roots)
    handed, listing = chained
    if listing is None:
        raise InfraError(f"could not {_hand_home_what(user)}: {handed.stderr.strip()[-300:]}")
    return listing


def _hand_home_what(user: DesktopUser) -> str:
    return f"give what setup made in {user.home} to {user.name}"


def grant_admin(admin: GuestShell, task: Task, user: DesktopUser) -> None:
    """For a task with agent_privileges: admin, the desktop user gets admin rights for this episode."""
    _admin_step(admin, task.guest.grant_admin_script(user), f"give {user.name} admin rights")


ADMIN_STEP_TIMEOUT = 60.0  # handing the home over, granting admin rights


def _admin_step(admin: GuestShell, script: str, what: str) -> None:
    result = admin.run(script, timeout=ADMIN_STEP_TIMEOUT)
    if not result.ok:
        raise InfraError(f"could not {what}: {result.stderr.strip()[-300:]}")


def _stage(shell: GuestShell, task: Task, folder: str) -> None:
    """Copies the task's files to FOLDER, made afresh and readable only by the shell's own account."""
    files = task.files()
    subfolders = sorted({str(p.parent.relative_to(task.folder)) for p in files} - {"."})
    made = shell.run(task.guest.stage_script(folder, subfolders), timeout=30)
    if not made.ok:
        raise InfraError(f"could not make {folder} in the guest to stage the task's files: "
                         f"{made.stderr.strip()[-300:]}")
    for path in files:
        shell.put(path, task.guest.staged_path(folder, str(path.relative_to(task.folder))))
