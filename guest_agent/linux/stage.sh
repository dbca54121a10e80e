# cu-run: runs as root
# shellcheck shell=sh
# Makes FOLDER afresh, readable by the shell's own account alone, and the folders named in the
# arguments, for a task's files copied one by one after it (runner.tasks.scripts: _stage): through
# the admin channel for a privileged script, or as the desktop user for the oracle. Fails when
# it cannot.
#
# Parameters:
#   FOLDER  the folder made afresh
# Arguments: the folders made in it (paths that begin with FOLDER)
: "${FOLDER?}"

umask 077; rm -rf "$FOLDER" && mkdir -m 0700 "$FOLDER" && mkdir -p "$FOLDER" "$@"
