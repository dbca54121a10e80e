# cu-run: runs as root
# shellcheck shell=sh
# The verdict helper (runner.scoring.verdict): defines `verdict` for a verify, checkpoint or safety
# script, which follows this file in the same shell, after the privileged prelude
# (runner.tasks.scripts: run_verifier):
#   verdict pass          records a pass, unless a fail is recorded, and ends the script
#   verdict fail REASON   records a fail and its reason, unless one is recorded, and ends the script
# A fail, once recorded, stands. The record is two files where only the admin can write; agent
# text in REASON cannot forge a pass. verdict-record.sh reads it back.
#
# Parameters (they stay, for the helper):
#   CU_RUN_VERDICT   the record's path, without its .pass or .fail
: "${CU_RUN_VERDICT?}"

# printf '%s': the reason is data, never a format or an escape sequence (dash's echo expands
# backslashes).
# shellcheck disable=SC2329 # verdict is for the script that follows
verdict() {
    case "$1" in
        pass) [ $# -eq 1 ] || { printf 'verdict pass takes no reason\n' >&2; exit 2; }
              [ -e "$CU_RUN_VERDICT.fail" ] || : > "$CU_RUN_VERDICT.pass" ;;
        fail) shift; [ -e "$CU_RUN_VERDICT.fail" ] || printf '%s' "${*:-no reason given}" > "$CU_RUN_VERDICT.fail" ;;
        *) printf 'verdict: say verdict pass, or verdict fail REASON\n' >&2; exit 2 ;;
    esac
    exit 0
}
