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
                  the user's files start outlives the call, and for at most AS_USER_TIMEOUT
                  seconds (30 by default), so a slow ~/.profile cannot hold the verifier
    verdict pass | verdict fail REASON
                  (Verdict in PowerShell; verify, checkpoints and safety checks) records the
                  verdict where only the admin can write, and ends the script. Agent text in
                  REASON cannot forge a pass (runner.scoring.verdict)

The working folder is / (Windows: the system folder), never one the agent can write: a script
names the user's files by $USER_HOME. After setup, whatever setup left in USER_HOME belongs to
the desktop user (the agent must be able to change the files the task gives it).
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from runner.errors import CommandTimeout, InfraError
from runner.guest.base import ExecResult, GuestShell
from runner.profiles import DesktopUser, Phase
from runner.profiles.parts import STAGING_FAILED, STAGING_FAILED_EXIT
from runner.profiles.listing import Listing, Watch, WriteSetLister, step_then_list, take_listing
from runner.tasks.model import Task

SCRIPT_TIMEOUT = 180.0


@dataclass(frozen=True)
class VerifierRun:
    """A verify, checkpoint or safety script's run: its output (stdout is only its log when it
    used the verdict helper) and what the helper recorded, or None when it recorded nothing."""

    result: ExecResult
    recorded: str | None


def run_privileged(admin: GuestShell, task: Task, kind: str, user: DesktopUser, phase: Phase,
                   timeout: float = SCRIPT_TIMEOUT, extra: dict[str, bytes] | None = None) -> ExecResult | None:
    """Runs the task's KIND script (setup, verify, checkpoints/NAME, safety/NAME) through the
    admin channel; None when the task has none. EXTRA: more files staged with the task's for
    this run only (an imported task's downloads for its setup). Raises CommandTimeout past
    TIMEOUT and GuestUnreachable when the guest is gone."""
    scripts = task.guest.scripts
    ran = _run_staged(admin, task, kind, scripts.admin_task_dir,
                      lambda folder: scripts.privileged_prelude(folder, user, phase), timeout, extra=extra)
    return None if ran is None else ran.result


def run_verifier(admin: GuestShell, task: Task, kind: str, user: DesktopUser,
                 timeout: float = SCRIPT_TIMEOUT) -> VerifierRun | None:
    """Runs KIND (verify, checkpoints/NAME, safety/NAME) like run_privileged, with the verdict
    helper: what it recorded comes back apart from the script's stdout, behind a boundary
    drawn here, which nothing in the guest can know (runner.scoring.verdict)."""
    scripts = task.guest.scripts
    token = secrets.token_hex(16)
    record = scripts.staged_path(scripts.admin_task_dir, f".cu-verdict-{token}")
    return _run_staged(admin, task, kind, scripts.admin_task_dir,
                       lambda folder: scripts.privileged_prelude(folder, user, "verify") + scripts.verdict_helper(record),
                       timeout, verdict=(record, f"cu-run-verdict-{token}"))


def run_as_agent(shell: GuestShell, task: Task, kind: str, timeout: float = SCRIPT_TIMEOUT) -> ExecResult | None:
    """Runs KIND (the oracle) through the desktop user's own shell: the agent's privileges."""
    ran = _run_staged(shell, task, kind, task.guest.scripts.agent_task_dir, task.guest.scripts.agent_prelude, timeout)
    return None if ran is None else ran.result


def _run_staged(shell: GuestShell, task: Task, kind: str, folder: str, prelude: Callable[[str], str],
                timeout: float, verdict: tuple[str, str] | None = None,
                extra: dict[str, bytes] | None = None) -> VerifierRun | None:
    """Stages the task's files (and EXTRA) in FOLDER, runs KIND after PRELUDE(FOLDER), removes
    FOLDER whatever happened. VERDICT: (the helper's record path, a boundary): the record is read
    back too."""
    script = task.script(kind)
    if script is None:
        return None
    text = prelude(folder) + script.read_text()
    files = {str(p.relative_to(task.folder).as_posix()): p.read_bytes() for p in task.files()} | (extra or {})
    after = task.guest.scripts.verdict_trailer(*verdict) if verdict is not None else ""
    one_command = task.guest.scripts.staged_run_script(folder, files, text, after)
    if one_command is None:
        _stage(shell, task, folder, extra or {})
        try:
            result = shell.run(text, timeout=timeout)
            recorded = None
            if verdict is not None:
                read = shell.run(task.guest.scripts.verdict_read_script(verdict[0]), timeout=30)
                recorded = _record_text(read.stdout) if read.ok and read.stdout.strip() else None
            return VerifierRun(result, recorded)
        finally:
            shell.run(task.guest.scripts.remove_script(folder), timeout=30)
    try:
        result = shell.run(one_command, timeout=timeout)
    except CommandTimeout:
        shell.run(task.guest.scripts.remove_script(folder), timeout=30)  # killed before it could remove them
        raise
    if result.exit_code == STAGING_FAILED_EXIT and STAGING_FAILED in result.stderr:
        raise InfraError(f"{STAGING_FAILED} in {folder}: {result.stderr.strip()[-300:]}")
    if verdict is None:
        return VerifierRun(result, None)
    # The last boundary: the trailer runs after the script has exited, so whatever the script
    # printed, the record is what follows it.
    log, found, recorded = result.stdout.rpartition(f"\n{verdict[1]}\n")
    if not found:
        return VerifierRun(result, None)
    return VerifierRun(ExecResult(result.exit_code, log, result.stderr), _record_text(recorded))


def _record_text(text: str) -> str:
    """The helper's record as "pass", or "fail", a line break and the reason."""
    return text.replace("\r\n", "\n").strip("\n")


def hand_home_to_user(admin: GuestShell, task: Task, user: DesktopUser) -> None:
    """After a setup run as the admin: what it made in the user's home is the user's."""
    _admin_step(admin, task.guest.scripts.hand_home_script(user), _hand_home_what(user))


def hand_home_then_list(admin: GuestShell, task: Task, user: DesktopUser, watch: Watch) -> Listing:
    """hand_home_to_user(), then the write-set listing of WATCH, in one guest command where the
    profile can chain them (runner.profiles.listing.step_then_list)."""
    lister = task.guest.needs(WriteSetLister, "the write set")
    chained = step_then_list(admin, task.guest.scripts, lister, task.guest.scripts.hand_home_script(user),
                             _hand_home_what(user), ADMIN_STEP_TIMEOUT, watch)
    if chained is None:
        hand_home_to_user(admin, task, user)
        return take_listing(admin, lister, watch)
    handed, listing = chained
    if listing is None:
        raise InfraError(f"could not {_hand_home_what(user)}: {handed.stderr.strip()[-300:]}")
    return listing


def _hand_home_what(user: DesktopUser) -> str:
    return f"give what setup made in {user.home} to {user.name}"


def grant_admin(admin: GuestShell, task: Task, user: DesktopUser) -> None:
    """For a task with agent_privileges: admin, the desktop user gets admin rights for this episode."""
    _admin_step(admin, task.guest.scripts.grant_admin_script(user), f"give {user.name} admin rights")


ADMIN_STEP_TIMEOUT = 60.0  # handing the home over, granting admin rights


def _admin_step(admin: GuestShell, script: str, what: str) -> None:
    result = admin.run(script, timeout=ADMIN_STEP_TIMEOUT)
    if not result.ok:
        raise InfraError(f"could not {what}: {result.stderr.strip()[-300:]}")


def _stage(shell: GuestShell, task: Task, folder: str, extra: dict[str, bytes]) -> None:
    """Copies the task's files and EXTRA ({relative path: bytes}) to FOLDER, made afresh and
    readable only by the shell's own account."""
    files = task.files()
    subfolders = sorted(({str(p.parent.relative_to(task.folder)) for p in files}
                         | {str(PurePosixPath(name).parent) for name in extra}) - {"."})
    made = shell.run(task.guest.scripts.stage_script(folder, subfolders), timeout=30)
    if not made.ok:
        raise InfraError(f"could not make {folder} in the guest to stage the task's files: "
                         f"{made.stderr.strip()[-300:]}")
    for path in files:
        shell.put(path, task.guest.scripts.staged_path(folder, str(path.relative_to(task.folder))))
    with tempfile.TemporaryDirectory() as scratch:
        for number, (name, data) in enumerate(extra.items()):
            local = Path(scratch) / str(number)
            local.write_bytes(data)
            shell.put(local, task.guest.scripts.staged_path(folder, name))
