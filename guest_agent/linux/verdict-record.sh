# cu-run: runs as root
# shellcheck shell=sh
# Prints what the verdict helper (verdict.sh) recorded: "pass", or "fail", a line break and the
# reason (its first MAX_RECORD bytes: it may hold agent data of any size); nothing when it
# recorded nothing. Through the admin channel, after a verify, checkpoint or safety script: in
# the same command, after the script has exited (runner.profiles.linux: verdict_trailer, with a
# BOUNDARY), or as a command of its own (verdict_read_script, BOUNDARY empty).
#
# Parameters:
#   CU_RUN_VERDICT    the record's path, without its .pass or .fail
#   CU_RUN_BOUNDARY   printed before the record, after a line break and on a line of its own; or empty
#   CU_RUN_MAX_RECORD the bytes of a reason printed
: "${CU_RUN_VERDICT?}"
: "${CU_RUN_BOUNDARY?}"
: "${CU_RUN_MAX_RECORD?}"

if [ -e "$CU_RUN_VERDICT.fail" ]; then
    [ -z "$CU_RUN_BOUNDARY" ] || printf '\n%s\n' "$CU_RUN_BOUNDARY"
    printf 'fail\n'; head -c "$CU_RUN_MAX_RECORD" "$CU_RUN_VERDICT.fail"
elif [ -e "$CU_RUN_VERDICT.pass" ]; then
    [ -z "$CU_RUN_BOUNDARY" ] || printf '\n%s\n' "$CU_RUN_BOUNDARY"
    printf pass
fi
