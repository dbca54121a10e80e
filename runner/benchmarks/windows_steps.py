"""WindowsAgentArena's config steps and getters as PowerShell, for the windows profile.

The same shape as runner.benchmarks.linux_steps: setup.ps1 and collect.ps1 run through the
admin channel (WinRM) and call the helpers of STEPS_PS1 (guest_agent/windows/benchmarks/
waa-steps.ps1, shipped beside each task as steps.ps1, dot-sourced with its parameters by HEADER);
each per-task line is a helper's name and its arguments, every value quoted by ps_quote. A program
the desktop user must see is started in the user's interactive session by a one-shot scheduled
task (the image's C:\\cu-run\\session\\start-in-session.ps1), which an execute step waits for, as
upstream's does; windows are found through the guest agent, in that session; the collector
writes under EXPORT_DIR and packs it with Windows' own tar.exe for the pull.

Upstream's paths name its user's home, C:\\Users\\Docker: Waa-Path maps it to the desktop
user's home at run time.
"""

from __future__ import annotations

from typing import Any

from runner.guest.powershell_quote import ps_quote
from runner.guest.programs import program_text
from runner.profiles.windows import START_IN_SESSION
from runner.benchmarks.linux_steps import (MAX_COLLECTED_FILE, Collectors, Script, StepLines, fill, gather_getters,
                                          translate_steps)

EXPORT_DIR = "C:\\ProgramData\\cu-run\\export"
UPSTREAM_HOME = "C:\\Users\\Docker"
VLCRC = UPSTREAM_HOME + "\\AppData\\Roaming\\vlc\\vlcrc"

# The helpers setup.ps1 and collect.ps1 call (steps.ps1 beside each task): the file as it is. Its
# parameters are given where HEADER dot-sources it.
STEPS_PS1 = program_text("windows/benchmarks/waa-steps.ps1")


def ps(value: Any) -> str:
    """A PowerShell single-quoted string literal."""
    return ps_quote(str(value))


def ps_list(values: list[Any]) -> str:
    return "@(" + ", ".join(ps(v) for v in values) + ")"


# What upstream's server does with a command before it starts it on Windows: Chrome by its Windows
# name; `start` (a cmd built-in) and `code` (a .cmd script) only through cmd, which CreateProcess
# needs for them; socat (a Linux CDP forwarder) exists on no Windows, so upstream's launch of it
# fails, is logged and the setup goes on: here it is left out, said in a comment.
RENAMED = {"google-chrome": "chrome"}
THROUGH_CMD = ("start", "code")
NOT_ON_WINDOWS = ("socat",)


def _command(params: dict[str, Any], plain: str, shell: str) -> str:
    if params.get("until"):  # upstream retries until a return code or output; no WAA task asks for it
        raise KeyError("'until' (retry until a condition) is not translated")
    command = fill(params.get("command"))
    if isinstance(command, list):
        command = [RENAMED.get(str(c), str(c)) for c in command]
        if command and command[0].lower() in NOT_ON_WINDOWS:
            return f"# upstream's {command[0]} does not exist on Windows: its launch fails there and setup goes on"
        if command and command[0].lower() in THROUGH_CMD and not params.get("shell"):
            return f"Waa-LaunchThroughCmd {ps_list(command)}"  # each word still mapped (~/, upstream's home)
    if isinstance(command, str) or params.get("shell"):
        return f"{shell} {ps(command if isinstance(command, str) else ' '.join(command))}"
    return f"{plain} {ps_list(command)}"


def _download(params: dict[str, Any], script: Script) -> str:
    lines = []
    for item in params.get("files", []):
        script.downloads[item["url"]] = item["path"]
        lines.append(f"Waa-Download {ps(item['url'])} {ps(item['path'])}")
    return "\r\n".join(lines)


STEP_LINES: StepLines = {
    "launch": lambda p, _: _command(p, "Waa-Launch", "Waa-LaunchShell"),
    "execute": lambda p, _: _command(p, "Waa-Execute", "Waa-ExecuteShell"),
    "command": lambda p, _: _command(p, "Waa-Execute", "Waa-ExecuteShell"),
    "open": lambda p, _: f"Waa-Open {ps(p['path'])}",
    "activate_window": lambda p, _: f"Waa-ActivateWindow {ps(p['window_name'])}",
    "close_window": lambda p, _: f"Waa-CloseWindow {ps(p['window_name'])}",
    "sleep": lambda p, _: f"Waa-Sleep {float(p.get('seconds', 1)):g}",
    "create_folder": lambda p, _: f"Waa-CreateFolder {ps(p['path'])}",
    "download": _download,
    "chrome_open_tabs": lambda p, _: f"Waa-ChromeOpenTabs {ps_list(p.get('urls_to_open', []))}",
}


HEADER = (". (Join-Path $env:TASK_DIR 'steps.ps1')"
          f" -WaaUpstreamHome {ps(UPSTREAM_HOME)} -WaaStartInSession {ps(START_IN_SESSION)}"
          f" -WaaExportDir {ps(EXPORT_DIR)} -WaaMaxFile {int(MAX_COLLECTED_FILE)}")


def setup_script(data: dict[str, Any]) -> Script:
    script = Script()
    translate_steps(list(data.get("config") or []), script, STEP_LINES)
    script.lines = ["# Translated from upstream's config steps by `cu-run tasks import` (upstream.json).", HEADER] \
        + script.lines
    return script


def _collect_vm_file(slot: str, config: dict[str, Any]) -> list[str]:
    paths = config["path"] if config.get("multi") else [config["path"]]
    return [f"Waa-CollectFile {ps(slot)} {index} {ps(path)}" for index, path in enumerate(paths)]


def _collect_command(slot: str, config: dict[str, Any]) -> list[str]:
    command = fill(config["command"])
    text = command if isinstance(command, str) else " ".join(f'"{c}"' if " " in str(c) else str(c) for c in command)
    return [f"Waa-CollectCommand {ps(slot)} {ps(text)}"]


COLLECTORS: Collectors = {
    "rule": lambda slot, config: [],
    "cloud_file": lambda slot, config: [],
    "vm_file": _collect_vm_file,
    "vm_command_line": _collect_command,
    "vm_command_error": _collect_command,
    "vlc_config": lambda slot, config: [f"Waa-CollectFile {ps(slot)} 0 {ps(VLCRC)}"],
}


def collect_script(data: dict[str, Any]) -> Script:
    script = Script()
    translate_steps(list((data.get("evaluator") or {}).get("postconfig") or []), script, STEP_LINES)
    script.lines.append("$ErrorActionPreference = 'Continue'  # a getter that finds nothing leaves a marker")
    script.lines.append("Waa-ExportBegin")
    gather_getters(data, script, COLLECTORS)
    script.lines.append("Waa-ExportEnd")
    script.lines = ["# Upstream's postconfig and getters, by `cu-run tasks import` (upstream.json).", HEADER] \
        + script.lines
    return script


def size_script(path: str) -> str:
    """Prints the size of the file at PATH, or nothing when there is none."""
    return f"(Get-Item -LiteralPath {ps(path)} -ErrorAction SilentlyContinue).Length"
