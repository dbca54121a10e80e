# cu-run: runs as root
# shellcheck shell=sh
# An Inspect sample's own command (its setup, its checks; never the agent's, whose tools run as
# the desktop user) as root or another account, through the admin channel
# (runner.sandbox.episode: SandboxEpisode._as_account). "$@" is NAME=VALUE words for its
# environment, then the command's words; its input, when it has one, travels in base64.
#
# Parameters:
#   CU_RUN_CWD       the folder the sample asked to run in
#   CU_RUN_ACCOUNT   the account: root (or 0), or another account's name
#   CU_RUN_ENVIRON   how many of "$@"'s first words are NAME=VALUE
#   CU_RUN_STDIN     the input, base64; empty with CU_RUN_HAS_STDIN 0: none (/dev/null)
#   CU_RUN_HAS_STDIN 1: there is input, 0: there is none
: "${CU_RUN_CWD?}" "${CU_RUN_ACCOUNT?}" "${CU_RUN_ENVIRON?}" "${CU_RUN_STDIN?}" "${CU_RUN_HAS_STDIN?}"

# The sample's own folder, as it asked: its code, not the agent's, runs from it.
# cu-run-lint: allow R1 -- the Inspect sample's cwd, which its own task author chose
cd "$CU_RUN_CWD" || exit 126
n=0
while [ "$n" -lt "$CU_RUN_ENVIRON" ]; do
    export "${1?}"
    shift
    n=$((n + 1))
done
run() {
    case $CU_RUN_ACCOUNT in
        root|0) exec "$@" ;;
        *) exec runuser -u "$CU_RUN_ACCOUNT" -- "$@" ;;
    esac
}
if [ "$CU_RUN_HAS_STDIN" = 1 ]; then
    printf '%s' "$CU_RUN_STDIN" | base64 -d | run "$@"
    exit $?
fi
run "$@" </dev/null
