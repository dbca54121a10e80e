# cu-run: runs as the desktop user
# shellcheck shell=sh
# One attack of `cu-run audit` (runner/audit/attacks.py), in the desktop user's own shell: the
# attacks' program left in the home (~/.cache, which the write set ignores, so that the staging
# itself fails no task), where the hooks and daemons it leaves find it again; then run.
#
# Parameters:
#   ATTACK        the attack's name
#   INSTRUCTION   the task's instruction, all that the attack knows of the task
#   PROGRAM_TEXT  guest_agent/linux/audit-attacks.py
: "${ATTACK?}" "${INSTRUCTION?}" "${PROGRAM_TEXT?}"
mkdir -p "$HOME/.cache" || exit 1
printf '%s\n' "$PROGRAM_TEXT" > "$HOME/.cache/cu-audit-attacks.py" || exit 1
export CU_AUDIT_GUEST=1  # the program runs nowhere else
exec /usr/bin/python3 -I "$HOME/.cache/cu-audit-attacks.py" "$ATTACK" "$INSTRUCTION"
