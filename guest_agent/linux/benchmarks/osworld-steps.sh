# cu-run: runs as root
# shellcheck shell=sh
# cu-run's helpers for OSWorld's steps: written beside every imported task as steps.sh by
# `cu-run tasks import` (runner.benchmarks.linux_steps), its parameters assigned in front, and
# sourced by the task's setup.sh and collect.sh, which run as root after the privileged prelude
# (TASK_DIR, USER_HOME, DESKTOP_USER and as_user: runner.tasks.scripts). Each helper acts as the
# desktop user, on its display; the session's D-Bus too: gsettings writes through dconf on it, as
# upstream's steps run in the session.
#
# Parameters:
#   OSW_EXPORT_DIR    where the collector gathers what the getters read (packed as OSW_EXPORT_DIR.tar)
#   OSW_MAX_FILE      the bytes one gathered file may hold: a bigger one is recorded as too large
#   OSW_OPEN_TABS_PY  the program of osw_chrome_open_tabs (osworld_open_tabs.py beside this file)
: "${OSW_EXPORT_DIR?}"
: "${OSW_MAX_FILE?}"
: "${OSW_OPEN_TABS_PY?}"

osw_user() {
    as_user env DISPLAY=:0 XAUTHORITY="$USER_HOME/.Xauthority" \
        DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$(id -u "$DESKTOP_USER")/bus" "$@"
}
osw_launch() { osw_user setsid -f "$@" >/dev/null 2>&1 </dev/null; }
osw_launch_shell() { osw_user setsid -f sh -c "$1" >/dev/null 2>&1 </dev/null; }
osw_execute() { osw_user "$@"; }
osw_execute_shell() { osw_user sh -c "$1"; }
# Upstream's `echo {CLIENT_PASSWORD} | sudo -S CMD`: setup and the collector run as root already,
# so the command runs as root, in the user's home, on the user's display.
osw_root_shell() { env HOME="$USER_HOME" DISPLAY=:0 XAUTHORITY="$USER_HOME/.Xauthority" sh -c "$1"; }
osw_sleep() { sleep "$1"; }

osw_windows() { osw_user wmctrl -lx 2>/dev/null; }
osw_wait_window() {  # TEXT SECONDS: a window whose title (or class) holds TEXT is up
    _deadline=$(($(date +%s) + $2))
    until osw_windows | grep -iqF -- "$1"; do
        [ "$(date +%s)" -lt "$_deadline" ] || { echo "no window like '$1' after $2 s" >&2; return 1; }
        sleep 0.5
    done
}
osw_open() {  # PATH: opened by its desktop default app; waits for a window with its name
    [ -e "$1" ] || { echo "cannot open $1: no such file" >&2; return 1; }
    osw_launch xdg-open "$1"
    _name=$(basename "$1"); osw_wait_window "${_name%.*}" 180  # GIMP's title drops the extension
}
osw_activate_window() {  # NAME STRICT BY_CLASS
    osw_wait_window "$1" 30 || return 1
    if [ "$3" = true ]; then osw_user wmctrl -x -a "$1"
    elif [ "$2" = true ]; then osw_user wmctrl -F -a "$1"
    else osw_user wmctrl -a "$1"; fi
}
osw_close_window() {  # NAME STRICT BY_CLASS
    if [ "$3" = true ]; then osw_user wmctrl -x -c "$1"
    elif [ "$2" = true ]; then osw_user wmctrl -F -c "$1"
    else osw_user wmctrl -c "$1"; fi
}
osw_download() {  # URL DEST: the asset the runner staged for URL, put at DEST as the user's
    _sha=$(awk -v url="$1" '$2 == url { print $1; exit }' "$TASK_DIR/assets/index" 2>/dev/null)
    # shellcheck disable=SC2015 # the message and the return are for either test failing
    [ -n "$_sha" ] && [ -f "$TASK_DIR/assets/$_sha" ] || { echo "no asset was staged for $1" >&2; return 1; }
    mkdir -p "$(dirname "$2")"
    cp "$TASK_DIR/assets/$_sha" "$2" && chown -h "$DESKTOP_USER:" "$2"
}
osw_quit_chrome() {  # upstream's `pkill chrome`: Chrome here is Chromium, whose processes are
    # named chromium. TERM makes it write its profile; waiting for it to end (30 s at most) lets
    # the next launch find the profile written and unlocked, where upstream's sleep guesses.
    pkill -x chromium || return 0
    _deadline=$(($(date +%s) + 30))
    while pgrep -x chromium >/dev/null; do
        [ "$(date +%s)" -lt "$_deadline" ] || { pkill -KILL -x chromium; break; }
        sleep 0.3
    done
}
osw_chrome_open_tabs() {  # URL...: as upstream does, each in a new tab of the Chrome it debugs,
    # waiting for each page to load, the last one in front (OSW_OPEN_TABS_PY). Chrome is started
    # first if it is not running (a launch step may have started it: its DevTools port then comes
    # up in its own time). Under TCG Chromium's network service can die while it starts and lose
    # a navigation: the program opens a tab again that has not loaded in a minute.
    pgrep -x chromium >/dev/null || osw_launch google-chrome --remote-debugging-port=1337
    # -I: it runs as root in USER_HOME, and the folder a program starts in is on its import path.
    python3 -I -c "$OSW_OPEN_TABS_PY" "$@"
}

# -- the collector's side: what a getter gathers goes under $EXPORT/SLOT
osw_export_begin() {
    EXPORT=$OSW_EXPORT_DIR
    # shellcheck disable=SC2174 # -m is for the export folder alone; its parents keep root's default mode
    rm -rf "$EXPORT" && mkdir -p -m 0700 "$EXPORT"
}
osw_collect_file() {  # SLOT INDEX PATH: a copy of the user's file, if it is one
    mkdir -p "$EXPORT/$1"
    # Only a regular file reached through no link: a link could point the getter at a file of
    # root's, a FIFO would hang the read. Read as the user, bounded in size and time.
    if [ -f "$3" ] && [ "$(realpath -e -- "$3" 2>/dev/null)" = "$3" ]; then  # cu-run-lint: allow R3 -- resolved only to refuse a path that goes through a link; the file is then read as the user
        osw_user cat -- "$3" | head -c "$((OSW_MAX_FILE + 1))" > "$EXPORT/$1/$2"
        if [ "$(stat -c %s "$EXPORT/$1/$2")" -gt "$OSW_MAX_FILE" ]; then
            rm -f "$EXPORT/$1/$2"; : > "$EXPORT/$1/$2.too-large"
        fi
    else
        : > "$EXPORT/$1/$2.missing"
    fi
}
osw_collect_home() {  # SLOT RELATIVE: the user's ~/RELATIVE as SLOT/home/RELATIVE, for a getter
    # of upstream's that reads it under $HOME (runner.benchmarks.score_entry runs it on the host)
    osw_collect_file "$1/home/$(dirname -- "$2")" "$(basename -- "$2")" "$USER_HOME/$2"
}
osw_collect_command() {  # SLOT ARGV...: the command's output and errors, run as the user
    _slot=$1; shift
    mkdir -p "$EXPORT/$_slot"
    osw_user "$@" 2>"$EXPORT/$_slot/stderr.full" | head -c "$OSW_MAX_FILE" > "$EXPORT/$_slot/stdout"
    head -c "$OSW_MAX_FILE" "$EXPORT/$_slot/stderr.full" > "$EXPORT/$_slot/stderr"; rm -f "$EXPORT/$_slot/stderr.full"
}
# shellcheck disable=SC2015 # the exit is for the tar or the removal failing
osw_export_end() { tar -C "$EXPORT" -cf "$EXPORT.tar" . && rm -rf "$EXPORT" || exit 1; }
