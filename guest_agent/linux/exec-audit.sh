# cu-run: runs as root
# shellcheck shell=sh
# The exec audit's two steps through the admin channel (runner.scoring.exec_audit): the log is
# written by auditd as root (images/common/rootfs/etc/audit/rules.d/cu-run.rules), and read from
# the disk on the host after the agent is stopped.
#   mark   just before the agent's turn: prints the log's size (what the host skips), then puts
#          the marker with the episode's nonce into the kernel's audit stream, so every program
#          logged after it ran in the turn
#   state  after the stop: whether auditd still runs, and how many records the kernel dropped
#   read   the log from an offset, bounded, as base64: where the host cannot read the disk
# mark and state print "lost N" (the kernel's count), so the host sees a record dropped between.
#
# Parameters:
#   CU_RUN_STEP   mark or state
#   CU_RUN_NONCE  the episode's nonce (mark)
#   CU_RUN_LOG    the log's path
#   CU_RUN_OFFSET the byte to read from (read)
#   CU_RUN_MAX    the most bytes to read (read)
: "${CU_RUN_STEP?}" "${CU_RUN_NONCE?}" "${CU_RUN_LOG?}" "${CU_RUN_OFFSET?}" "${CU_RUN_MAX?}"

if [ "$CU_RUN_STEP" = read ]; then
    [ -f "$CU_RUN_LOG" ] || { echo "no exec audit at $CU_RUN_LOG" >&2; exit 3; }
    tail -c "+$((CU_RUN_OFFSET + 1))" -- "$CU_RUN_LOG" | head -c "$CU_RUN_MAX" | base64 -w 0
    exit
fi

status=$(auditctl -s) || { echo "auditctl -s failed: is the kernel's audit on?" >&2; exit 3; }
field() { printf '%s\n' "$status" | sed -n "s/^$1 //p"; }
case $CU_RUN_STEP in
    mark)
        [ "$(field pid)" != 0 ] || { echo "auditd is not running" >&2; exit 3; }
        printf 'offset %s\n' "$(stat -c %s -- "$CU_RUN_LOG")"
        auditctl -m "cu-run agent-begins $CU_RUN_NONCE" || exit 3
        ;;
    state)
        printf 'running %s\n' "$([ "$(field pid)" != 0 ] && echo 1 || echo 0)"
        ;;
    *) echo "unknown step $CU_RUN_STEP" >&2; exit 2 ;;
esac
printf 'lost %s\n' "$(field lost)"
