"""WindowsAgentArena's config steps and getters as PowerShell, for the windows profile.

The same shape as runner.benchmarks.linux_steps: setup.ps1 and collect.ps1 run through the
admin channel (WinRM) and call the helpers of STEPS_PS1 (steps.ps1 beside each task). A program
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
from runner.profiles.windows import START_IN_SESSION
from runner.benchmarks.linux_steps import (MAX_COLLECTED_FILE, Collectors, Script, StepLines, fill, gather_getters,
                                          translate_steps)

EXPORT_DIR = "C:\\ProgramData\\cu-run\\export"
UPSTREAM_HOME = "C:\\Users\\Docker"
VLCRC = UPSTREAM_HOME + "\\AppData\\Roaming\\vlc\\vlcrc"

STEPS_PS1 = r"""# cu-run's helpers for WindowsAgentArena's steps (written by `cu-run tasks import`; dot-sourced
# by setup.ps1 and collect.ps1, which run as the admin).
$ErrorActionPreference = 'Stop'
function Waa-Path([string]$Path) {
    if ($Path.StartsWith('__UPSTREAM_HOME__', [StringComparison]::OrdinalIgnoreCase)) {
        return $env:USER_HOME + $Path.Substring('__UPSTREAM_HOME__'.Length)
    }
    # Upstream's server expands ~/ in a command's arguments to its user's home.
    if ($Path.StartsWith('~/') -or $Path.StartsWith('~\')) { return $env:USER_HOME + '\' + $Path.Substring(2) }
    return $Path
}
function Waa-AsUser([string]$File, [string[]]$Arguments, [switch]$Wait) {
    # In the desktop user's interactive session (the image's start-in-session.ps1: a one-shot
    # scheduled task): what it starts is on the user's screen, with the user's rights. It returns
    # once the program has started (upstream's launch), or with -Wait once it has ended
    # (upstream's execute, which waits for the command's output).
    $mapped = @($Arguments | ForEach-Object { Waa-Path $_ })
    & '__START_IN_SESSION__' -User $env:DESKTOP_USER -FilePath $File -ArgumentList $mapped -Wait:$Wait -TimeoutSeconds 300
}
function Waa-Launch([string[]]$Command) { Waa-AsUser $Command[0] @($Command | Select-Object -Skip 1) }
function Waa-LaunchThroughCmd([string[]]$Command) { Waa-AsUser 'cmd.exe' (@('/c') + $Command) }
function Waa-LaunchShell([string]$Command) { Waa-AsUser 'cmd.exe' @('/c', $Command) }
function Waa-Execute([string[]]$Command) { Waa-AsUser $Command[0] @($Command | Select-Object -Skip 1) -Wait }
function Waa-ExecuteShell([string]$Command) { Waa-AsUser 'cmd.exe' @('/c', $Command) -Wait }
function Waa-WindowTitles {
    # Window titles as the desktop user's session sees them: from WinRM's session 0,
    # Get-Process's MainWindowTitle is empty for every program on the user's screen.
    $answer = & 'C:\cu-run\guest-agent\invoke.ps1' 'windows'
    if ($LASTEXITCODE -ne 0) { throw "the guest agent could not list the windows (exit $LASTEXITCODE)" }
    @(($answer | Out-String | ConvertFrom-Json).windows | ForEach-Object { $_.title })
}
function Waa-Sleep([double]$Seconds) { Start-Sleep -Milliseconds ([int]($Seconds * 1000)) }
function Waa-WaitWindow([string]$Text, [int]$Seconds) {
    $deadline = (Get-Date).AddSeconds($Seconds)
    while (-not (Waa-WindowTitles | Where-Object { $_ -like "*$Text*" })) {
        if ((Get-Date) -gt $deadline) { throw "no window like '$Text' after $Seconds s" }
        Start-Sleep -Milliseconds 500
    }
}
function Waa-Open([string]$Path) {
    $Path = Waa-Path $Path
    if (-not (Test-Path -LiteralPath $Path)) { throw "cannot open ${Path}: no such file" }
    Waa-AsUser 'explorer.exe' @($Path)
    Waa-WaitWindow ([IO.Path]::GetFileNameWithoutExtension($Path)) 180
}
function Waa-ActivateWindow([string]$Name) {
    Waa-WaitWindow $Name 30
    $quoted = $Name -replace "'", "''"
    Waa-AsUser 'powershell.exe' @('-NoProfile', '-Command', "(New-Object -ComObject WScript.Shell).AppActivate('$quoted')")
}
function Waa-CloseWindow([string]$Name) {
    # Closed from the user's session, where the windows are.
    $quoted = $Name -replace "'", "''"
    $close = "Get-Process | Where-Object { `$_.MainWindowTitle -like '*$quoted*' } | " +
        "ForEach-Object { `$_.CloseMainWindow() | Out-Null }"
    Waa-AsUser 'powershell.exe' @('-NoProfile', '-Command', $close) -Wait
}
function Waa-CreateFolder([string]$Path) {
    New-Item -ItemType Directory -Force -Path (Waa-Path $Path) | Out-Null
}
function Waa-Download([string]$Url, [string]$Path) {
    $Path = Waa-Path $Path
    $index = Get-Content -LiteralPath (Join-Path $env:TASK_DIR 'assets\index')
    $line = $index | Where-Object { $_.EndsWith(' ' + $Url) } | Select-Object -First 1
    if (-not $line) { throw "asset for $Url was not staged" }
    New-Item -ItemType Directory -Force -Path (Split-Path -Parent $Path) | Out-Null
    Copy-Item -LiteralPath (Join-Path $env:TASK_DIR ('assets\' + $line.Substring(0, 64))) -Destination $Path -Force
    icacls $Path /setowner $env:DESKTOP_USER | Out-Null
}
function Waa-ChromeOpenTabs([string[]]$Urls) { Waa-AsUser 'chrome.exe' (@('--remote-debugging-port=1337') + $Urls) }

# -- the collector's side
function Waa-ExportBegin {
    $script:Export = '__EXPORT_DIR__'
    Remove-Item -LiteralPath $script:Export -Recurse -Force -ErrorAction SilentlyContinue
    New-Item -ItemType Directory -Force -Path $script:Export | Out-Null
}
function Waa-CollectFile([string]$Slot, [int]$Index, [string]$Path) {
    $Path = Waa-Path $Path
    $folder = Join-Path $script:Export $Slot
    New-Item -ItemType Directory -Force -Path $folder | Out-Null
    $item = Get-Item -LiteralPath $Path -Force -ErrorAction SilentlyContinue
    # Only a plain file: a reparse point (a link) could aim the getter at a file of the admin's.
    if ($item -and -not $item.PSIsContainer -and -not ($item.Attributes -band [IO.FileAttributes]::ReparsePoint)) {
        if ($item.Length -gt __MAX_FILE__) { New-Item -ItemType File -Path (Join-Path $folder "$Index.too-large") | Out-Null }
        else { Copy-Item -LiteralPath $Path -Destination (Join-Path $folder "$Index") }
    } else {
        New-Item -ItemType File -Path (Join-Path $folder "$Index.missing") | Out-Null
    }
}
function Waa-CollectCommand([string]$Slot, [string]$Command) {
    $folder = Join-Path $script:Export $Slot
    New-Item -ItemType Directory -Force -Path $folder | Out-Null
    $out = Join-Path $folder 'stdout'
    $err = Join-Path $folder 'stderr'
    Waa-AsUser 'cmd.exe' @('/c', "$Command > `"$out`" 2> `"$err`"") -Wait
}
function Waa-ExportEnd {
    tar.exe -C $script:Export -cf "$($script:Export).tar" .
    Remove-Item -LiteralPath $script:Export -Recurse -Force
}
""".replace("__EXPORT_DIR__", EXPORT_DIR).replace("__UPSTREAM_HOME__", UPSTREAM_HOME) \
   .replace("__START_IN_SESSION__", START_IN_SESSION).replace("__MAX_FILE__", str(MAX_COLLECTED_FILE))


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


HEADER = ". (Join-Path $env:TASK_DIR 'steps.ps1')"


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
