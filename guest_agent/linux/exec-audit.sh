# cu-run: runs as root
# shellcheck shell=sh
# The exec audit's steps through the admin channel (runner.scoring.turn_programs): the log is
# written by auditd as root (images/common/rootfs/etc/audit/rules.d/cu-run.rules), and read from
# the disk on the host after the agent is stopped.
#   mark   just before the agent's turn: no process may trace another from now on (a tracer
#          could rewrite a program's arguments between its exec and the kernel's reading them for
#          the log), then the log's size (what the host skips), then the marker with the episode's
#          nonce into the kernel's audit stream, so every program logged after it ran in the turn
#   end    after the stop: the end marker, then a wait until the log holds it (the kernel delivers
#          in order, so every record of the turn is in the log by then); whether it came
#   read   the log from an offset, bounded, as base64: where the host cannot read the disk
# mark and end print "running 1|0" (auditd) and "lost N" (the records the kernel dropped), so
# the host sees the logger gone or a record dropped between the two.
#
# Parameters:
#   CU_RUN_STEP   mark, end or read
#   CU_RUN_NONCE  the episode's nonce (mark, end)
#   CU_RUN_LOG    the log's path
#   CU_RUN_OFFSET the byte to read from (read)
#   CU_RUN_MAX    the most bytes to read (read)
: "${CU_RUN_STEP?}" "${CU_RUN_NONCE?}" "${CU_RUN_LOG?}" "${CU_RUN_OFFSET?}" "${CU_RUN_MAX?}"

if [ "$CU_RUN_STEP" = read ]; then
    [ -f "$CU_RUN_LOG" ] || { echo "no exec audit at $CU_RUN_LOG" >&2; exit 3; }
    tail -c "+$((CU_RUN_OFFSET + 1))" -- "$CU_RUN_LOG" | head -c "$CU_RUN_MAX" | base64 -w 0
    exit
fi
# Each program started costs tens of milliseconds under TCG: the shell's own reads do the rest.
state() {
    status=$(auditctl -s) || { echo "auditctl -s failed: is the kernel's audit on?" >&2; exit 3; }
    pid=0 lost=
    while read -r name value; do
        case $name in pid) pid=$value ;; lost) lost=$value ;; esac
    done <<STATUS
$status
STATUS
    if [ "$pid" != 0 ]; then echo "running 1"; else echo "running 0"; fi
    echo "lost $lost"
}
case $CU_RUN_STEP in
    mark)
        { echo 2 > /proc/sys/kernel/yama/ptrace_scope; } 2>/dev/null || { echo "could not forbid ptrace" >&2; exit 3; }
        printf 'offset %s\n' "$(stat -c %s -- "$CU_RUN_LOG")"
        auditctl -m "cu-run agent-begins $CU_RUN_NONCE" || exit 3
        ;;
    end)
        auditctl -m "cu-run agent-ends $CU_RUN_NONCE" || exit 3
        n=0
        until grep -qF "agent-ends $CU_RUN_NONCE" -- "$CU_RUN_LOG"; do
            n=$((n + 1))
            [ "$n" -lt 300 ] || break  # 30 s: the host then finds no end, and the log incomplete
            sleep 0.1
        done
        ;;
    *) echo "unknown step $CU_RUN_STEP" >&2; exit 2 ;;
esac
state
