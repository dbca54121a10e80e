# cu-run: runs as root
# shellcheck shell=sh
# Prints the desktop user's processes, one PID:START a line (START: its start time in clock
# ticks since boot, field 22 of /proc/PID/stat). Through the admin channel, before the agent's
# turn (runner.scoring.quarantine: user_processes), for the quarantine's KEEP: a PID the agent
# frees and gets again for a process of its own (it can spin through PIDs) is not the process
# that was kept.
#
# Parameters:
#   DESKTOP_USER  the desktop user's name
: "${DESKTOP_USER?}"

for p in $(pgrep -u "$DESKTOP_USER"); do
    { read -r s < "/proc/$p/stat"; } 2>/dev/null || continue
    # shellcheck disable=SC2086 # split on purpose: the fields of stat after the command's name
    set -- ${s##*) }; printf '%s:%s\n' "$p" "${20}"
done
