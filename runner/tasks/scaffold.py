"""`cu-run tasks new NAME --suite FOLDER`: a task folder that lints clean and says what to fill in.

The scripts follow the contract of docs/tasks.md: setup and verify run as the admin with
$USER_HOME and $DESKTOP_USER set; the verifier ends with the `verdict` helper, its data printed
with printf (never echo, which expands escapes in the agent's text); the oracle runs as the
desktop user and solves the task, so `cu-run validate` can prove the verifier right. The files
are runner/tasks/templates/new-task/, shipped in the package.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.errors import UsageError

# The files of a new task, as it starts: task.yaml's {name} is the task's id.
TEMPLATE = Path(__file__).parent / "templates" / "new-task"
FILES = ("task.yaml", "setup.sh", "verify.sh", "oracle.sh")
NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def new_task(suite: Path, name: str) -> Path:
    """Writes SUITE/NAME/ with task.yaml, setup.sh, verify.sh and oracle.sh (a task for the Linux
    guests; a Windows task starts best from a copy of one of tasks/windows-core); returns the folder."""
    if not NAME.match(name):
        raise UsageError(f"{name!r} is not a task id: lower-case letters, digits and dashes, starting with a letter "
                         "or digit", fix="for example: cu-run tasks new save-report --suite my-suite")
    folder = suite / name
    if folder.exists():
        raise UsageError(f"{folder} exists already", fix="choose another name, or edit that task")
    folder.mkdir(parents=True)
    for file in FILES:
        text = (TEMPLATE / file).read_text(encoding="utf-8")
        (folder / file).write_text(text.replace("{name}", name) if file == "task.yaml" else text)
    return folder
