# cu-run: runs as the verifier account
# cu-run's helpers for WindowsAgentArena's steps: written beside every imported task as steps.ps1
# by `cu-run tasks import` (runner.benchmarks.windows_steps) and dot-sourced, with its parameters,
# by the task's setup.ps1 and collect.ps1, which run as the admin through WinRM after the
# privileged prelude ($env:TASK_DIR, $env:USER_HOME, $env:DESKTOP_USER: runner.tasks.scripts).
# Dot-sourced, its parameters are variables of the caller's scope, where the helpers read them.
#
# Parameters:
#   WaaUpstreamHome    upstream's user's home (C:\Users\Docker), which Waa-Path maps to the desktop user's
#   WaaStartInSession  the image's start-in-session.ps1, which starts a program in the user's session
#   WaaExportDir       where the collector gathers what the getters read (packed as WaaExportDir.tar)
#   WaaMaxFile         the bytes one gathered file may hold: a bigger one is recorded as too large
param(
    [string]$WaaUpstreamHome,
    [string]$WaaStartInSession,
    [string]$WaaExportDir,
    [long]$WaaMaxFile
)
$ErrorActionPreference = 'Stop'
function Waa-Path([string]$Path) {
    if ($Path.StartsWith($WaaUpstreamHome, [StringComparison]::OrdinalIgnoreCase)) {
        return $env:USER_HOME + $Path.Substring($WaaUpstreamHome.Length)
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
    & $WaaStartInSession -User $env:DESKTOP_USER -FilePath $File -ArgumentList $mapped -Wait:$Wait -TimeoutSeconds 300
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
    # The evidence is gathered in a folder only administrators may enter, which the image made
    # (install-guest-agent.ps1): users may create folders in C:\ProgramData, so one the desktop
    # user made first would be the user's, and what the collector writes there the user's to change.
    $parent = Split-Path -Parent $WaaExportDir
    $acl = Get-Acl -LiteralPath $parent -ErrorAction SilentlyContinue
    if ($null -eq $acl -or -not $acl.AreAccessRulesProtected -or
        $acl.GetOwner([System.Security.Principal.SecurityIdentifier]).Value -ne 'S-1-5-32-544') {
        throw "$parent is not the image's administrators-only folder: rebuild the image (cu-run image build windows-11)"
    }
    $script:Export = $WaaExportDir
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
        if ($item.Length -gt $WaaMaxFile) { New-Item -ItemType File -Path (Join-Path $folder "$Index.too-large") | Out-Null }
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
    # The command runs as the user, as upstream's does, and writes its two output files and
    # nothing else of the export: each is made here and the user granted modify on it alone.
    foreach ($file in $out, $err) {
        New-Item -ItemType File -Force -Path $file | Out-Null
        & icacls.exe $file /grant "$($env:DESKTOP_USER):M" /Q | Out-Null
        if ($LASTEXITCODE -ne 0) { throw "icacls $file exited $LASTEXITCODE" }
    }
    # /d: no AutoRun command from the user's registry runs before the command (cmd.exe /?).
    Waa-AsUser 'cmd.exe' @('/d', '/c', "$Command > `"$out`" 2> `"$err`"") -Wait
}
function Waa-ExportEnd {
    tar.exe -C $script:Export -cf "$($script:Export).tar" .
    Remove-Item -LiteralPath $script:Export -Recurse -Force
}
