"""OSWorld's config steps and getters as shell, for the linux-desktop guest.

Upstream runs a task server in its VM that performs each config step (launch a program, open
a file, press keys through pyautogui, download a file) as the desktop user. Here the same
steps are lines of a setup.sh and a collect.sh, run through the admin channel, calling the
helpers of STEPS_SH (shipped beside every imported task as steps.sh), which act as the
desktop user on its display (`as_user`, runner.tasks.scripts).

The collector runs after the agent, with what the agent started killed (desktop_in_verify):
first upstream's postconfig (its Ctrl+S makes the app write the file a getter reads), then
each getter, writing what it gathered into EXPORT_DIR, which the runner pulls to the host.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


EXPORT_DIR = "/var/lib/cu-run/export"
SCREEN = (1920, 1080)  # linux-desktop's, and OSWorld's
MAX_COLLECTED_FILE = 64 * 2**20  # one gathered file: a bigger one is recorded as too large

# Upstream's commands name the screen through these, filled in by its runner.
PLACEHOLDERS = {
    "{SCREEN_WIDTH}": str(SCREEN[0]), "{SCREEN_HEIGHT}": str(SCREEN[1]),
    "{SCREEN_WIDTH_HALF}": str(SCREEN[0] // 2), "{SCREEN_HEIGHT_HALF}": str(SCREEN[1] // 2),
}

STEPS_SH = r"""# cu-run's helpers for OSWorld's steps (written by `cu-run tasks import`; sourced by setup.sh
# and collect.sh, which run as root). Each acts as the desktop user, on its display.
# The session's D-Bus too: gsettings writes through dconf on it, as upstream's steps run in the session.
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
    [ -n "$_sha" ] && [ -f "$TASK_DIR/assets/$_sha" ] || { echo "no asset was staged for $1" >&2; return 1; }
    mkdir -p "$(dirname "$2")"
    cp "$TASK_DIR/assets/$_sha" "$2" && chown "$DESKTOP_USER:" "$2"
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
    # waiting for each page to load (upstream: Playwright's goto), the last one in front. Chrome
    # is started first if it is not running (a launch step may have started it: its DevTools port
    # then comes up in its own time). Under TCG Chromium's network service
    # can die while it starts and lose a navigation: a tab that has not loaded in a minute is
    # opened again (three tries); one that never loads is said, and setup goes on, as upstream's.
    pgrep -x chromium >/dev/null || osw_launch google-chrome --remote-debugging-port=1337
    python3 - "$@" <<'PY'
import json, sys, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # local: never through a proxy
def call(path, method="GET"):
    with opener.open(urllib.request.Request("http://127.0.0.1:1337" + path, method=method), timeout=10) as reply:
        return reply.read()
deadline = time.monotonic() + 180
while True:
    try:
        call("/json/version")
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("Chrome's DevTools did not answer on port 1337 in 180 s")
        time.sleep(0.5)
last = None
for url in sys.argv[1:]:
    for _try in range(3):
        tab = json.loads(call("/json/new?" + url, "PUT"))["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            titles = {t["id"]: t.get("title") for t in json.loads(call("/json/list"))}
            if tab not in titles or titles[tab]:
                break
            time.sleep(0.5)
        if titles.get(tab):
            last = tab
            break
        try:
            call("/json/close/" + tab)
        except OSError:
            pass
    else:
        print(f"{url}: no page after 3 tries", file=sys.stderr)
if last is not None:
    call("/json/activate/" + last)
PY
}

# -- the collector's side: what a getter gathers goes under $EXPORT/SLOT
osw_export_begin() {
    EXPORT=__EXPORT_DIR__
    rm -rf "$EXPORT" && mkdir -p -m 0700 "$EXPORT"
}
osw_collect_file() {  # SLOT INDEX PATH: a copy of the user's file, if it is one
    mkdir -p "$EXPORT/$1"
    # Only a regular file reached through no link: a link could point the getter at a file of
    # root's, a FIFO would hang the read. Read as the user, bounded in size and time.
    if [ -f "$3" ] && [ "$(realpath -e -- "$3" 2>/dev/null)" = "$3" ]; then
        osw_user cat -- "$3" | head -c __MAX_FILE_PLUS_ONE__ > "$EXPORT/$1/$2"
        if [ "$(stat -c %s "$EXPORT/$1/$2")" -gt __MAX_FILE__ ]; then
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
    osw_user "$@" 2>"$EXPORT/$_slot/stderr.full" | head -c __MAX_FILE__ > "$EXPORT/$_slot/stdout"
    head -c __MAX_FILE__ "$EXPORT/$_slot/stderr.full" > "$EXPORT/$_slot/stderr"; rm -f "$EXPORT/$_slot/stderr.full"
}
osw_export_end() { tar -C "$EXPORT" -cf "$EXPORT.tar" . && rm -rf "$EXPORT" || exit 1; }
""".replace("__EXPORT_DIR__", EXPORT_DIR).replace("__MAX_FILE_PLUS_ONE__", str(MAX_COLLECTED_FILE + 1)) \
   .replace("__MAX_FILE__", str(MAX_COLLECTED_FILE))


@dataclass
class Script:
    """Shell lines, the assets they need (url -> where in the guest), and what could not be
    translated (each a reason the task cannot run here)."""

    lines: list[str] = field(default_factory=list)
    downloads: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def fill(value: Any) -> Any:
    """Upstream's screen placeholders filled in, in a string or list of strings."""
    if isinstance(value, list):
        return [fill(v) for v in value]
    if isinstance(value, str):
        for key, text in PLACEHOLDERS.items():
            value = value.replace(key, text)
    return value


SUDO = re.compile(r"echo\s+['\"]?(\{CLIENT_PASSWORD\}|password)['\"]?\s*\|\s*sudo\s+-S\s+")


QUIT_CHROME = ("pkill chrome", "killall chrome")


def _command(params: dict[str, Any], runner: str) -> str:
    command = fill(params.get("command"))
    if (" ".join(map(str, command)) if isinstance(command, list) else str(command).strip()) in QUIT_CHROME:
        return "osw_quit_chrome"
    if isinstance(command, str) or params.get("shell"):
        text = command if isinstance(command, str) else " ".join(command)
        if SUDO.search(text):
            return f"osw_root_shell {shlex.quote(SUDO.sub('', text))}"
        return f"{runner}_shell {shlex.quote(text)}"
    return f"{runner} {' '.join(shlex.quote(str(c)) for c in command)}"


def _window_args(params: dict[str, Any]) -> str:
    return " ".join([shlex.quote(str(params.get("window_name", ""))),
                     "true" if params.get("strict") else "false", "true" if params.get("by_class") else "false"])


def _launch(p, _): return _command(p, "osw_launch")
def _execute(p, _): return _command(p, "osw_execute")
def _open(p, _): return f"osw_open {shlex.quote(str(p['path']))}"
def _activate(p, _): return f"osw_activate_window {_window_args(p)}"
def _close(p, _): return f"osw_close_window {_window_args(p)}"
def _sleep(p, _): return f"osw_sleep {float(p.get('seconds', 1)):g}"
def _tabs(p, _): return "osw_chrome_open_tabs " + " ".join(shlex.quote(u) for u in p.get("urls_to_open", []))


def _download(params: dict[str, Any], script: Script) -> str:
    lines = []
    for item in params.get("files", []):
        script.downloads[item["url"]] = item["path"]
        lines.append(f"osw_download {shlex.quote(item['url'])} {shlex.quote(item['path'])}")
    return "\n".join(lines)


# Each step type's line maker, and each getter type's gatherer (WAA's PowerShell has its own of both).
StepLines = dict[str, Callable[[dict[str, Any], Script], str]]
Collectors = dict[str, Callable[[str, dict[str, Any]], list[str]]]

STEP_LINES: StepLines = {
    "launch": _launch, "execute": _execute, "command": _execute, "open": _open,
    "activate_window": _activate, "close_window": _close, "sleep": _sleep,
    "download": _download, "chrome_open_tabs": _tabs,
}


def translate_steps(steps: list[dict[str, Any]], script: Script, step_lines: StepLines = STEP_LINES) -> None:
    """Appends STEPS to SCRIPT, each by its line maker in STEP_LINES (this guest's shell by
    default; WAA's PowerShell passes its own). A sleep right before activate_window becomes a
    wait for that window (a condition, not a time), bounded by 30 s like the activation itself."""
    for number, step in enumerate(steps):
        kind, params = step.get("type"), step.get("parameters") or {}
        following = steps[number + 1] if number + 1 < len(steps) else {}
        if kind == "sleep" and following.get("type") == "activate_window":
            script.lines.append(f"# upstream sleeps {params.get('seconds')} s here; the next step waits for its window")
            continue
        make = step_lines.get(str(kind))
        if make is None:
            script.problems.append(f"step {kind}: not translated to this guest")
            continue
        try:
            script.lines.append(make(params, script))
        except (KeyError, TypeError) as exc:
            script.problems.append(f"step {kind}: malformed parameters ({exc})")


def setup_script(data: dict[str, Any]) -> Script:
    script = Script()
    translate_steps(list(data.get("config") or []), script)
    header = ["# Translated from upstream's config steps by `cu-run tasks import` (upstream.json).",
              '. "$TASK_DIR/steps.sh"', "set -e"]
    script.lines = header + script.lines
    return script


# -- getters: what the collector gathers for each, under $EXPORT/<slot>

def _paths(config: dict[str, Any]) -> list[tuple[int, str]]:
    paths = config["path"] if config.get("multi") else [config["path"]]
    return list(enumerate(map(str, paths)))


def _collect_vm_file(slot: str, config: dict[str, Any]) -> list[str]:
    if config.get("time_suffix"):
        raise ValueError("vm_file with time_suffix names its file by the scoring time")
    return [f"osw_collect_file {slot} {index} {shlex.quote(path)}" for index, path in _paths(config)]


def _collect_command(slot: str, config: dict[str, Any]) -> list[str]:
    command = fill(config["command"])
    if isinstance(command, str) or config.get("shell"):
        text = command if isinstance(command, str) else " ".join(command)
        return [f"osw_collect_command {slot} sh -c {shlex.quote(text)}"]
    return [f"osw_collect_command {slot} {' '.join(shlex.quote(str(c)) for c in command)}"]


def _collect_home_file(relative: str) -> Callable[[str, dict[str, Any]], list[str]]:
    def collect(slot: str, config: dict[str, Any]) -> list[str]:
        path = relative.format(**config)
        return [f'osw_collect_file {slot} 0 "$USER_HOME"/{shlex.quote(path)}']
    return collect


# Upstream's getters that read one file of Chrome's profile under $HOME: the collector gathers
# that file, and the host runs the getter itself on it (runner.benchmarks.score_entry).
CHROME_PROFILE_GETTERS = {
    **dict.fromkeys(("default_search_engine", "profile_name", "chrome_font_size", "enable_do_not_track",
                     "enable_enhanced_safety_browsing", "enable_safe_browsing", "new_startup_page",
                     "data_delete_automacally", "find_unpacked_extension_path",
                     "find_installed_extension_name"), "Default/Preferences"),
    "bookmarks": "Default/Bookmarks",
    "chrome_language": "Local State",
    "enabled_experiments": "Local State",
}


def _collect_chrome_profile(slot: str, config: dict[str, Any]) -> list[str]:
    relative = f".config/google-chrome/{CHROME_PROFILE_GETTERS[config['type']]}"
    return [f"osw_collect_home {slot} {shlex.quote(relative)}"]


def _host_only(slot: str, config: dict[str, Any]) -> list[str]:
    return []  # rules and gold files: the host has them; nothing of the guest's is read


COLLECTORS: Collectors = {
    "rule": _host_only,
    "cloud_file": _host_only,
    "vm_file": _collect_vm_file,
    "vm_command_line": _collect_command,
    "vm_command_error": _collect_command,
    "vlc_config": _collect_home_file(".config/vlc/vlcrc"),
    "gimp_config_file": _collect_home_file(".config/GIMP/2.10/{file_name}"),
    **dict.fromkeys(CHROME_PROFILE_GETTERS, _collect_chrome_profile),
}


def slots(data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each getter of the evaluator with its slot name: result-0, expected-0, ..."""
    evaluator = data.get("evaluator") or {}
    found = []
    for key in ("result", "expected"):
        value = evaluator.get(key)
        items = value if isinstance(value, list) else [value] if value else []
        found += [(f"{key}-{i}", item) for i, item in enumerate(items) if isinstance(item, dict)]
    return found


def gather_getters(data: dict[str, Any], script: Script, collectors: Collectors) -> None:
    """Appends each getter's gathering by its maker in COLLECTORS; a getter without one, or with
    parameters its maker cannot take, is a reason the task cannot run here."""
    for slot, config in slots(data):
        make = collectors.get(str(config.get("type")))
        if make is None:
            script.problems.append(f"getter {config.get('type')}: the collector does not gather it yet")
            continue
        try:
            script.lines += make(slot, config)
        except (KeyError, TypeError, ValueError) as exc:
            script.problems.append(f"getter {config.get('type')}: {exc}")


def collect_script(data: dict[str, Any]) -> Script:
    """Upstream's postconfig, then each getter's gathering, then the export packed for the pull."""
    script = Script()
    translate_steps(list((data.get("evaluator") or {}).get("postconfig") or []), script)
    script.lines.append("osw_export_begin")
    gather_getters(data, script, COLLECTORS)
    script.lines.append("osw_export_end")
    # No `set -e`: as upstream, a postconfig step that fails is logged and the rest goes on (the
    # agent may have closed the window a step activates); a getter that finds nothing leaves a
    # marker, and the metric decides.
    script.lines = ["# Upstream's postconfig and getters, by `cu-run tasks import` (upstream.json).",
                    '. "$TASK_DIR/steps.sh"'] + script.lines
    return script


def size_script(path: str) -> str:
    """Prints the size of the file at PATH, or nothing when there is none."""
    return f"stat -c %s {shlex.quote(path)} 2>/dev/null"
