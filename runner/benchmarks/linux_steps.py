"""OSWorld's config steps and getters as shell, for the linux-desktop guest.

Upstream runs a task server in its VM that performs each config step (launch a program, open
a file, press keys through pyautogui, download a file) as the desktop user. Here the same
steps are lines of a setup.sh and a collect.sh, run through the admin channel, calling the
helpers of STEPS_SH (guest_agent/linux/benchmarks/osworld-steps.sh, shipped beside every
imported task as steps.sh), which act as the desktop user on its display (`as_user`,
runner.tasks.scripts). The per-task lines are made here from upstream's JSON: each a helper's
name and its arguments, every value from upstream quoted by shlex.quote.

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

from runner.guest.programs import program_text, sh_program

EXPORT_DIR = "/var/lib/cu-run/export"
SCREEN = (1920, 1080)  # linux-desktop's, and OSWorld's
MAX_COLLECTED_FILE = 64 * 2**20  # one gathered file: a bigger one is recorded as too large

# Upstream's commands name the screen through these, filled in by its runner.
PLACEHOLDERS = {
    "{SCREEN_WIDTH}": str(SCREEN[0]), "{SCREEN_HEIGHT}": str(SCREEN[1]),
    "{SCREEN_WIDTH_HALF}": str(SCREEN[0] // 2), "{SCREEN_HEIGHT_HALF}": str(SCREEN[1] // 2),
}

# The helpers setup.sh and collect.sh call (steps.sh beside each task): the file, its parameters
# assigned in front, the program of osw_chrome_open_tabs among them.
STEPS_SH = sh_program("linux/benchmarks/osworld-steps.sh", OSW_EXPORT_DIR=EXPORT_DIR, OSW_MAX_FILE=MAX_COLLECTED_FILE,
                      OSW_OPEN_TABS_PY=program_text("linux/benchmarks/osworld_open_tabs.py"))


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
            seconds = " ".join(str(params.get("seconds")).split())  # upstream's value, on the comment's line alone
            script.lines.append(f"# upstream sleeps {seconds} s here; the next step waits for its window")
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
