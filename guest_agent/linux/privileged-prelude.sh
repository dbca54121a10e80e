# cu-run: runs as root
# shellcheck shell=sh
# The privileged prelude: what runs before a task's setup, verify, checkpoint or safety script,
# in the same shell, through the admin channel (runner.tasks.scripts: run_privileged). It gives the
# script what runner.tasks.scripts documents: TASK_DIR, USER_HOME and DESKTOP_USER exported,
# as_user, and / as the working folder: root never starts in a folder the agent can write, where
# `python3 -` (without -I) would import the agent's modules and a relative path would be the
# agent's link.
#
# Parameters (the first three stay, for the script):
#   TASK_DIR       the task's staged files
#   USER_HOME      the desktop user's home
#   DESKTOP_USER   the desktop user's name
#   CU_RUN_PHASE   setup, verify or collect: which as_user the script gets (unset once read)
#   CU_RUN_READ_ONLY  read-only-mounts.sh, which verify's as_user runs first
: "${TASK_DIR?}"
: "${USER_HOME?}"
: "${DESKTOP_USER?}"
: "${CU_RUN_PHASE?}"
: "${CU_RUN_READ_ONLY?}"
export TASK_DIR USER_HOME DESKTOP_USER

# as_user CMD: runs CMD as the desktop user, in a clean environment.
# shellcheck disable=SC2329 # as_user is for the task's script, which follows this prelude
if [ "$CU_RUN_PHASE" = setup ]; then
    # Before the agent the guest is as the image made it: what setup starts may stay.
    as_user() { runuser -u "$DESKTOP_USER" -- env -i HOME="$USER_HOME" USER="$DESKTOP_USER" LOGNAME="$DESKTOP_USER" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"; }
else
    # During verification the user's files are the agent's: what they start is killed with its
    # cgroup (cgroup.kill reaches double-forked daemons too), and a call ends after
    # AS_USER_TIMEOUT seconds (30 unless the script sets it; exit 124), so a slow ~/.profile
    # cannot make the verifier run past its own time. In verify, what it runs sees every
    # filesystem read-only, in a mount namespace of its own: code of the agent's that it starts
    # (a ~/.profile, a service) cannot change what the verifier reads next, where the write set's
    # second listing would not see it (ignored churn, /tmp, a file made and removed again).
    # A collector (collect: an imported benchmark's postconfig) may have the user's apps write.
    if [ "$CU_RUN_PHASE" = verify ]; then _rw=read_only; else _rw=; fi
    as_user() {
        _cg=/sys/fs/cgroup/cu-run-as-user-$$
        mkdir -p "$_cg" || return 125
        # shellcheck disable=SC2016 # $$ and $1 are the inner sh's: it joins the cgroup, then becomes CMD
        sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' as_user "$_cg" ${_rw:+unshare --mount --propagation private sh -c "$CU_RUN_READ_ONLY" read_only} timeout -k 2 "${AS_USER_TIMEOUT:-30}" runuser -u "$DESKTOP_USER" -- env -i HOME="$USER_HOME" USER="$DESKTOP_USER" LOGNAME="$DESKTOP_USER" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"
        _status=$?
        echo 1 > "$_cg/cgroup.kill"
        _n=0; while [ $_n -lt 100 ] && [ -s "$_cg/cgroup.procs" ]; do sleep 0.05; _n=$((_n + 1)); done
        rmdir "$_cg" 2>/dev/null
        return $_status
    }
fi
unset CU_RUN_PHASE
cd / || exit 125
