# cu-run: runs as root
# shellcheck shell=sh
# A task's script and its files in one guest command (runner.profiles.linux: staged_run_script):
# stages the files in FOLDER, made afresh and readable by the shell's own account alone; runs the
# script (staged as one of the files) in a subshell, its stdin empty; then AFTER; removes FOLDER;
# exits with the script's exit code. Through the admin channel for setup, verify and the checks,
# and in the desktop user's shell for the oracle (runner.tasks.scripts: _run_staged).
#
# Under TCG every command, file copy and program started costs (~0.3 s a command, 0.05-0.15 s a
# program): the files travel inside the one command, and the script runs in a subshell of this
# one. Text files are written by the shell's own printf; only when one is binary do they go as a
# tar in base64 (two programs more). A folder left by a killed earlier run is removed first; only
# then is rm needed. Staging that fails prints STAGING_FAILED and exits STAGING_FAILED_EXIT.
#
# Parameters:
#   CU_RUN_FOLDER               the folder made afresh
#   CU_RUN_SCRIPT               the script to run, one of the files
#   CU_RUN_FOLDERS              how many of the arguments, the last ones, are folders made in FOLDER
#   CU_RUN_TAR                  the files as a tar, base64; empty: they are in the arguments
#   CU_RUN_AFTER                a program's text (the runner's own, from a file beside this one) run
#                               in this shell after the script, FOLDER still there; or empty
#   CU_RUN_STAGING_FAILED       what a staging that fails prints on stderr
#   CU_RUN_STAGING_FAILED_EXIT  and its exit code
# Arguments: PATH TEXT for each file (CU_RUN_TAR empty), then the folders made in FOLDER (paths
# that begin with it).
: "${CU_RUN_FOLDER?}"
: "${CU_RUN_SCRIPT?}"
: "${CU_RUN_FOLDERS?}"
: "${CU_RUN_TAR?}"
: "${CU_RUN_AFTER?}"
: "${CU_RUN_STAGING_FAILED?}"
: "${CU_RUN_STAGING_FAILED_EXIT?}"

# FOLDER and the folders in it (the last CU_RUN_FOLDERS arguments), in one mkdir.
cu_run_make() {
    shift $(($# - CU_RUN_FOLDERS))
    mkdir -m 0700 "$CU_RUN_FOLDER" "$@"
}

# The files: from the tar, or each PATH TEXT pair of the arguments with the shell's printf.
cu_run_fill() {
    if [ -n "$CU_RUN_TAR" ]; then
        printf %s "$CU_RUN_TAR" | base64 -d | tar -xf - --no-same-owner -C "$CU_RUN_FOLDER"
    else
        while [ $# -gt "$CU_RUN_FOLDERS" ]; do printf %s "$2" > "$1" || return; shift 2; done
    fi
}

umask 077
# shellcheck disable=SC2015 # on purpose: failing to make the folders or to fill them is one failure
{ cu_run_make "$@" 2>/dev/null || { rm -rf "$CU_RUN_FOLDER" && cu_run_make "$@"; }; } && cu_run_fill "$@" || { echo "$CU_RUN_STAGING_FAILED" >&2; exit "$CU_RUN_STAGING_FAILED_EXIT"; }
# The script sees what a shell of its own would, but for CU_RUN_SCRIPT: none of the arguments,
# the other parameters or the functions above.
(
    unset CU_RUN_FOLDER CU_RUN_FOLDERS CU_RUN_TAR CU_RUN_AFTER CU_RUN_STAGING_FAILED CU_RUN_STAGING_FAILED_EXIT
    unset -f cu_run_make cu_run_fill
    set --
    # shellcheck disable=SC1090 # the task's script, staged just above
    . "$CU_RUN_SCRIPT"
) </dev/null
rc=$?
eval "$CU_RUN_AFTER"
rm -rf "$CU_RUN_FOLDER"
exit $rc
