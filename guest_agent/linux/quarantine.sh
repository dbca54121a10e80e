# cu-run: runs as root
# shellcheck shell=sh
# The quarantine: stops the agent's processes before verification (runner.scoring.quarantine),
# through the admin channel, after the agent's turn. This file defines its steps as functions;
# the runner sends it (runner.profiles.linux: quarantine_script) with one line after it that calls
# the quarantine the task asks for:
#   freeze_user   the default: the desktop user's slice frozen (cgroup v2 freezer), and what runs
#                 outside the slice killed;
#   kill_new      desktop_in_verify: the desktop keeps running, and what the agent started (every
#                 process of the user's that is not in KEEP) is killed; see kill_new.
# A unit test calls one step alone in the same way.
#
# Under TCG each process the guest starts costs ~50 ms: the steps read /proc, /etc/passwd and
# the cgroup files with the shell's own `read`, not with a program per process.
#
# Parameters:
#   DESKTOP_USER  the desktop user's name
#   USER_HOME     the desktop user's home
#   KEEP          kill_new: the processes that ran before the agent, PID:START space-separated
#   X_DISPLAY     the number of the display the desktop runs on ("0")
#   X_SWEEP       the X sweep's program (x_sweep.py beside this file)
#   HIDE_FOLDERS  the program that hides the bus's service folders (hide_folders.py beside this file)
: "${DESKTOP_USER?}"
: "${USER_HOME?}"
: "${KEEP?}"
: "${X_DISPLAY?}"
: "${X_SWEEP?}"
: "${HIDE_FOLDERS?}"

# Sets u to the desktop user's uid, or exits 3, and cg to the user's slice: from /etc/passwd,
# with the shell's own `read` (the guest's `id` is a program, ~0.15 s under TCG).
desktop_uid() {
    u=; while IFS=: read -r n _ i _; do [ "$n" = "$DESKTOP_USER" ] && { u=$i; break; }; done < /etc/passwd
    [ -n "$u" ] || { echo 'the desktop user is not in /etc/passwd' >&2; exit 3; }
    cg=/sys/fs/cgroup/user.slice/user-$u.slice
}

frozen() { f=0; while read -r k v; do [ "$k" = frozen ] && f=$v; done < "$cg/cgroup.events"; [ "$f" = 1 ]; }

# Freezes the user's slice, or exits 4 (cannot) or 5 (it did not freeze). The first checks
# spin: `sleep` is a program, and the freezer is often done at once.
freeze_slice() {
    echo 1 > "$cg/cgroup.freeze" || exit 4
    t=0; until frozen || [ $t -ge 220 ]; do [ $t -lt 20 ] || sleep 0.05; t=$((t + 1)); done
    frozen || { echo "the user's slice did not freeze" >&2; exit 5; }
}

# Kills, until none is left, every process of the user's for which the test named $1 (a
# function of $p) fails. A process gone since pgrep listed it may have left a child that pgrep did
# not list (one that forks and exits, over and over): the list is taken again. A zombie is dead
# already. Still finding some after 50 rounds, it fails (exit 11): what outruns the kill is the
# agent's doing.
kill_outside() {
    round=0
    while [ $round -lt 50 ]; do
        round=$((round + 1)); left=0
        for p in $(pgrep -u "$u"); do
            [ -d "/proc/$p" ] || { left=1; continue; }
            "$1" && continue
            zombie && continue
            kill -9 "$p" 2>/dev/null; left=1
        done
        [ $left = 0 ] && return 0
        sleep 0.05
    done
    echo "processes of the desktop user's kept appearing through 50 rounds of kills" >&2
    exit 11
}

# Whether process $p is a zombie with no thread left but its leader: dead, only not reaped yet.
zombie() {
    { s=; read -r s < "/proc/$p/stat"; } 2>/dev/null
    case "${s##*) }" in Z*) ;; *) return 1;; esac
    for t in /proc/"$p"/task/*; do [ "${t##*/}" = "$p" ] || return 1; done
}

# For kill_outside: whether process $p is in the user's slice.
in_user_slice() {
    { l=; read -r l < "/proc/$p/cgroup"; } 2>/dev/null
    case "$l" in *"/user-$u.slice/"*) true;; *) false;; esac
}

# For kill_outside: whether process $p is one to keep (see kill_new), or gone. A zombie counts
# as kept: it is dead already, and its frozen parent cannot reap it until the thaw. But
# /proc/PID/stat is the leader thread's: a thread group whose leader has exited shows Z while its
# other threads run on. So a Z is dead only when /proc/PID/task holds no thread but the leader (a
# glob, not a program: ~50 ms a process under TCG).
kept() {
    { s=; read -r s < "/proc/$p/stat"; } 2>/dev/null; [ -n "$s" ] || return 0
    # shellcheck disable=SC2086 # split on purpose: the fields of stat after the command's name
    set -- ${s##*) }
    if [ "$1" = Z ]; then z=1; for t in /proc/"$p"/task/*; do [ "${t##*/}" = "$p" ] || z=0; done; [ $z = 0 ] || return 0; fi
    tty=$((($5 >> 8) & 4095))
    case "$keep" in *" $p:${20} "*) [ $tty -lt 136 ] || [ $tty -gt 143 ];; *) false;; esac
}

# Kept processes whose job is to start others, which would start the agent's code again after
# the kill: the user's service manager (systemd --user: a unit with Restart=always, a timer, a
# socket; its own cgroup is user@UID.service/init.scope) and the XSMP session managers (they
# restart their clients; found by comm, which the kernel cuts at 15 characters). SIGSTOP while
# the slice is frozen, so they never run again, and no SIGCONT after. The verifier needs neither:
# the services the desktop runs are running. Sets starters (their PIDs) and bus (1 when a session
# bus of the user's runs).
stop_starters() {
    starters=' '; bus=0
    for p in $(pgrep -u "$u"); do
        { l=; read -r l < "/proc/$p/cgroup"; c=; read -r c < "/proc/$p/comm"; } 2>/dev/null
        case "$c" in dbus-daemon|dbus-broker) bus=1;; esac
        case "$l" in *"/user@$u.service/init.scope") ;; *)
            case "$c" in xfce4-session|gnome-session-b|gnome-session-c|lxsession|lxqt-session|mate-session|ksmserver|cinnamon-sessio) ;; *) continue;; esac;; esac
        kill -STOP "$p" 2>/dev/null && starters="$starters$p "
    done
}

# The session bus starts a service named in a file of the user's own service folders
# (~/.local/share/dbus-1/services; $XDG_RUNTIME_DIR/dbus-1/services) when anything asks for its
# name: a verifier's query would start the agent's code, which would answer it. Each such folder
# that exists gets an empty read-only tmpfs over it, and the bus reloads after the thaw
# (reload_bus). The disk keeps what the agent left, but the listing after does not enter the
# tmpfs: ~/.local is the desktop's own churn, which the write set ignores anyway. Root follows no
# link of the agent's on the way (hide_folders.py opens each part without following one and
# mounts on what it opened): a link there fails the quarantine (exit 10), the agent's doing. Run
# once no process of the user's can run (the kept frozen, the rest killed), so nothing changes
# the folders meanwhile. Sets hidden.
hide_bus_services() {
    hidden=$(python3 -I -S -c "$HIDE_FOLDERS" "$USER_HOME" .local/share/dbus-1/services \
        "/run/user/$u" dbus-1/services) || exit $?
    hidden=$(printf '%s' "$hidden" | tr '\n' ' ')
}

# A running session bus read the hidden folders before: told to reload its configuration, it
# forgets their services, and answers only once it has (dbus-send waits for the reply). As the
# user, over the bus's socket, where a bus of the user's runs (stop_starters sets bus=1); none
# that runs now can start later, its starter stopped. Bounded: the agent may have stopped the
# bus. A bus that did not reload could still start the agent's code: the quarantine fails (exit 8).
reload_bus() {
    if [ -n "$hidden" ] && [ "$bus" = 1 ] && [ -S "/run/user/$u/bus" ]; then
        timeout 10 runuser -u "$DESKTOP_USER" -- env DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$u/bus" dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.ReloadConfig >/dev/null || { echo "the session bus did not reload" >&2; exit 8; }
    fi
}

# The X sweep (x_sweep.py), $1 its mode: "dead" or "unkept". Exits 9 when it fails.
x_sweep() {
    python3 -I -S -c "$X_SWEEP" "$X_DISPLAY" "$u" "$KEEP" "$1" || exit 9
}

# The default quarantine: the user's slice frozen, and every process of the user's outside it
# killed. Prints how many processes it froze.
freeze_user() {
    desktop_uid
    n=0
    if [ -d "$cg" ]; then
        freeze_slice
        # Every cgroup of the slice, to the depth systemd makes (user@UID.service/app.slice/UNIT):
        # cgroup.procs lists only a cgroup's own members.
        for f in "$cg"/cgroup.procs "$cg"/*/cgroup.procs "$cg"/*/*/cgroup.procs "$cg"/*/*/*/cgroup.procs; do
            [ -f "$f" ] || continue
            while read -r _; do n=$((n + 1)); done < "$f"
        done
    fi
    kill_outside in_user_slice
    echo "froze $n processes of the desktop user"
}

# desktop_in_verify: the user's slice frozen first, so nothing in it can fork while the new
# processes are killed in one pass (a process that forks as fast as it is killed cannot outrun
# a frozen cgroup). Kept: what ran before the agent (PID and start time), but not a kept process
# on a pseudo-terminal: that is a shell the agent could type into, whose builtins run without a
# new process. Then the slice thaws, and every kept process gets SIGCONT, should the agent have
# stopped one (the window manager, a session bus) so that the verifier's query of the desktop
# would hang. Last, the X server forgets what the killed clients left (x_sweep).
kill_new() {
    desktop_uid
    keep=" $KEEP "
    froze=0
    if [ -d "$cg" ]; then
        freeze_slice
        froze=1
    fi
    stop_starters
    kill_outside kept
    hide_bus_services
    [ $froze = 0 ] || echo 0 > "$cg/cgroup.freeze" || exit 6
    for p in $(pgrep -u "$u"); do case "$starters" in *" $p "*) ;; *) kill -CONT "$p" 2>/dev/null;; esac; done
    reload_bus
    # What a kept process started in the moment since the thaw.
    kill_outside kept
    x_sweep unkept
    echo "killed the desktop user's processes started during the episode, and its terminals' shells"
    [ "$starters" = ' ' ] || echo "stopped the processes that start others for the user:$starters"
    [ -z "$hidden" ] || echo "hid the user's session-bus services: $hidden"
}
