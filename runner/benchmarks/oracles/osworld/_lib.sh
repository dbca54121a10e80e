# cu-run's helpers for its OSWorld oracles (written by cu-run, not upstream; beside each oracle as
# oracle_lib.sh). The oracle is the agent: it runs as the desktop user, with the user's rights.

# quit PROCESS: it has exited (asked first, then made to), so it cannot overwrite what follows
quit() {
    pkill -x "$1" 2>/dev/null || return 0
    n=0
    while pgrep -x "$1" >/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    pkill -9 -x "$1" 2>/dev/null || true
}

# vlcrc_set KEY VALUE: VLC's setting KEY in ~/.config/vlc/vlcrc, as its preferences dialog saves it
vlcrc_set() {
    f="$HOME/.config/vlc/vlcrc"
    mkdir -p "$(dirname "$f")"
    [ -f "$f" ] || printf '[qt]\n' > "$f"
    sed -i "/^#\{0,1\}$1=/d" "$f"
    printf '%s=%s\n' "$1" "$2" >> "$f"
}

# gimp_set FILE KEY VALUE: (KEY VALUE) in GIMP 2.10's FILE (gimprc, sessionrc), as GIMP writes it
gimp_set() {
    f="$HOME/.config/GIMP/2.10/$1"
    mkdir -p "$(dirname "$f")"
    touch "$f"
    sed -i "/^($2 /d" "$f"
    printf '(%s %s)\n' "$2" "$3" >> "$f"
}

# gset SCHEMA KEY VALUE: a GSettings key, through the session's dconf as the desktop's settings do
gset() {
    DBUS_SESSION_BUS_ADDRESS="unix:path=/run/user/$(id -u)/bus" gsettings set "$1" "$2" "$3"
}

# chrome_edit FILE PYTHON: Chrome's profile file FILE (under ~/.config/google-chrome) changed by
# the Python statements PYTHON on `d`, its JSON, with Chrome closed so that it cannot write over
# the change; as its settings page would have saved it. Chrome here is Chromium (process chromium).
chrome_edit() {
    quit chromium
    f="$HOME/.config/google-chrome/$1"
    mkdir -p "$(dirname "$f")"
    python3 - "$f" "$2" <<'PY'
import json, os, sys
path, change = sys.argv[1], sys.argv[2]
d = json.load(open(path)) if os.path.exists(path) else {}
exec(change)
with open(path + ".new", "w") as out:
    json.dump(d, out)
os.replace(path + ".new", path)
PY
}
