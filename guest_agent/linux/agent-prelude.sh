# cu-run: runs as the desktop user
# shellcheck shell=sh
# The agent's prelude: what runs before the oracle, in the same shell, the desktop user's own
# (runner.tasks.scripts: run_as_agent): TASK_DIR exported, the user's home entered.
#
# Parameters (it stays, for the script):
#   TASK_DIR  the task's staged files
: "${TASK_DIR?}"
export TASK_DIR
# shellcheck disable=SC2164 # where the home is missing the oracle runs where the shell began, as it always has
cd "$HOME"
