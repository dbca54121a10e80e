"""`cu-run tasks new NAME --suite FOLDER`: a task folder that lints clean and says what to fill in.

The scripts follow the contract of docs/tasks.md: setup and verify run as the admin with
$USER_HOME and $DESKTOP_USER set; the verifier ends with the `verdict` helper, its data printed
with printf (never echo, which expands escapes in the agent's text); the oracle runs as the
desktop user and solves the task, so `cu-run validate` can prove the verifier right.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner.errors import UsageError

TASK_YAML = """\
id: {name}
# The only thing the agent sees.
instruction: >-
  Write the word done into ~/goal.txt.
profile: linux
timeout_s: 300
tags: []
difficulty: easy
# The paths the agent may change; a change anywhere else in the desktop user's home fails the task.
write_set:
  allow: ["~/goal.txt"]
"""
SETUP = """\
# Runs as the admin before the agent: the state the task starts from.
rm -f "$USER_HOME/goal.txt"
"""
VERIFY = """\
# Runs as the admin after the agent, its processes stopped. End with `verdict pass` or
# `verdict fail REASON`; print the agent's data with printf '%s', never with echo.
f="$USER_HOME/goal.txt"
[ -f "$f" ] || verdict fail "$f does not exist"
found=$(head -c 200 "$f")
[ "$found" = done ] && verdict pass
verdict fail "goal.txt holds: $(printf '%s' "$found" | tr -cd '[:print:]')"
"""
ORACLE = """\
# Runs as the desktop user, in place of the agent: solves the task (cu-run validate checks it does).
printf 'done' > "$HOME/goal.txt"
"""
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
    for file, text in (("task.yaml", TASK_YAML.format(name=name)), ("setup.sh", SETUP),
                       ("verify.sh", VERIFY), ("oracle.sh", ORACLE)):
        (folder / file).write_text(text)
    return folder
