"""Running a task's scripts in the guest.

The task's files travel into the guest just before a script runs and are removed right
after, so the agent never finds the verifier or the oracle lying in the guest.
Linux: /tmp/.cu-task, the script run by sh with TASK_DIR exported and the home folder as
working directory. Windows: C:\\cu-task, the script run by PowerShell with $env:TASK_DIR
set and the user profile as working directory.
"""

from __future__ import annotations

import shlex

from runner.guest.base import ExecResult, GuestShell
from runner.tasks import Task

GUEST_TASK_DIR = "/tmp/.cu-task"
WINDOWS_TASK_DIR = "C:\\cu-task"
SCRIPT_TIMEOUT = 180.0


def run_task_script(shell: GuestShell, task: Task, kind: str, timeout: float = SCRIPT_TIMEOUT) -> ExecResult | None:
    """Runs the task's KIND script (setup, verify, oracle, checkpoints/NAME); None when the task has none.

    Raises CommandTimeout past TIMEOUT and GuestUnreachable when the guest is gone.
    """
    script = task.script(kind)
    if script is None:
        return None
    windows = task.spec.profile == "windows"
    _stage(shell, task, windows)
    try:
        if windows:
            prelude = f"$env:TASK_DIR = '{WINDOWS_TASK_DIR}'\r\nSet-Location -LiteralPath $env:USERPROFILE\r\n"
        else:
            prelude = f"TASK_DIR={shlex.quote(GUEST_TASK_DIR)}; export TASK_DIR; cd \"$HOME\"\n"
        return shell.run(prelude + script.read_text(), timeout=timeout)
    finally:
        shell.run(f"Remove-Item -LiteralPath '{WINDOWS_TASK_DIR}' -Recurse -Force -ErrorAction SilentlyContinue"
                  if windows else f"rm -rf {GUEST_TASK_DIR}", timeout=30)


def _stage(shell: GuestShell, task: Task, windows: bool) -> None:
    files = task.files()
    folders = sorted({str(p.parent.relative_to(task.folder)) for p in files} - {"."})
    if windows:
        made = "".join(f"New-Item -ItemType Directory -Force -Path '{WINDOWS_TASK_DIR}\\{d.replace('/', chr(92))}'"
                       " | Out-Null\r\n" for d in folders)
        shell.run(f"Remove-Item -LiteralPath '{WINDOWS_TASK_DIR}' -Recurse -Force -ErrorAction SilentlyContinue\r\n"
                  f"New-Item -ItemType Directory -Force -Path '{WINDOWS_TASK_DIR}' | Out-Null\r\n{made}", timeout=30)
        for path in files:
            shell.put(path, WINDOWS_TASK_DIR + "\\" + str(path.relative_to(task.folder)).replace("/", "\\"))
        return
    mkdirs = " ".join(shlex.quote(f"{GUEST_TASK_DIR}/{d}") for d in folders)
    shell.run(f"rm -rf {GUEST_TASK_DIR} && mkdir -p -m 0700 {GUEST_TASK_DIR} {mkdirs}", timeout=30)
    for path in files:
        shell.put(path, f"{GUEST_TASK_DIR}/{path.relative_to(task.folder)}")
