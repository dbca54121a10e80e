# cu-run: runs as the verifier account
# A networked episode's guest end on Windows (runner/network/carriers.py; runner.profiles.
# windows_network), started through the admin channel before the task's setup:
# - the forwarder, run as SYSTEM by the image's Python (under Program Files, which only
#   administrators write: install-python.ps1), started by the Task Scheduler: what a WinRM command
#   starts itself lives in the shell's job object, with the shell's limits, and WMI's
#   Win32_Process.Create puts it in its provider host's job; a scheduled task's process is in neither;
# - an inbound firewall rule for the host's carriers, from user-mode networking's host side alone;
# - the episode's CA in the machine's root store, which Edge, Chrome, WinINet and WinHTTP read
#   (Firefox reads it by its ImportEnterpriseRoots policy, among Policies);
# - the proxy: the desktop user's WinINet settings, HTTP_PROXY and HTTPS_PROXY in the machine's
#   environment, and the browsers' policies (Policies). Not WinHTTP's machine-wide proxy: Windows'
#   own services read it (certificate lists, SmartScreen), and their requests, refused, would
#   count as the agent's violations (docs/network.md).
#
# Parameters:
#   Forwarder    the forwarder's program (Python, standard library only), base64
#   CaCert       the episode CA's certificate (DER), base64: never its key
#   DesktopUser  the desktop user's account name (autologon: its settings are loaded)
#   ProxyServer  the proxy's address for the guest's applications (127.0.0.1:PORT)
#   CarrierPort  where the host's carriers arrive
#   CarrierFrom  the one address they come from (10.0.2.2)
#   Policies     registry values, each "KEY<TAB>NAME<TAB>DWord or String<TAB>VALUE"
param(
    [string]$Forwarder = '',
    [string]$CaCert = '',
    [string]$DesktopUser = '',
    [string]$ProxyServer = '',
    [int]$CarrierPort = 0,
    [string]$CarrierFrom = '',
    [string[]]$Policies = @()
)
$ErrorActionPreference = 'Stop'
$folder = 'C:\cu-run\network'
$python = Join-Path $env:ProgramFiles 'Python313\python.exe'
$program = Join-Path $folder 'forwarder.py'
$log = Join-Path $folder 'forwarder.log'

# Made anew below C:\cu-run, where the desktop user can make nothing (install-guest-agent.ps1).
if (Test-Path -LiteralPath $folder) { Remove-Item -LiteralPath $folder -Recurse -Force }
New-Item -ItemType Directory -Path $folder | Out-Null
[IO.File]::WriteAllBytes($program, [Convert]::FromBase64String($Forwarder))

New-NetFirewallRule -DisplayName 'cu-run network carriers' -Direction Inbound -Protocol TCP `
    -LocalPort $CarrierPort -RemoteAddress $CarrierFrom -Program $python -Action Allow | Out-Null

# -I -S: no site module and no user paths (the forwarder needs the standard library only). cmd
# writes its output to the log; /s takes the outer quotes off and keeps the inner ones (cmd /?).
$arguments = "/d /s /c `"`"$python`" -I -S `"$program`" > `"$log`" 2>&1`""
$action = New-ScheduledTaskAction -Execute 'cmd.exe' -Argument $arguments -WorkingDirectory $folder
$principal = New-ScheduledTaskPrincipal -UserId 'SYSTEM' -LogonType ServiceAccount -RunLevel Highest
# No time limit: it serves the whole episode, whose overlay is then discarded with the task.
# Priority 4, a normal process's (a task's default, 7, is below normal, with low I/O): it carries
# every request the agent's applications make.
$settings = New-ScheduledTaskSettingsSet -ExecutionTimeLimit ([TimeSpan]::Zero) -AllowStartIfOnBatteries `
    -DontStopIfGoingOnBatteries -Priority 4
Register-ScheduledTask -TaskName 'cu-run-network' -Action $action -Principal $principal -Settings $settings `
    -Force | Out-Null
Start-ScheduledTask -TaskName 'cu-run-network'

function Read-ForwarderLog {
    # cmd holds the log open for writing: read it sharing that.
    try {
        $stream = [IO.File]::Open($log, 'Open', 'Read', 'ReadWrite')
        try { return (New-Object IO.StreamReader($stream)).ReadToEnd() } finally { $stream.Dispose() }
    } catch { return '' }
}
# A stopwatch, not the clock: a task's frozen clock may be set in this episode.
$waited = [Diagnostics.Stopwatch]::StartNew()
while (-not ((Read-ForwarderLog) -match 'listening')) {
    # Its last result while it has not run yet, is queued or runs: SCHED_S_TASK_HAS_NOT_RUN,
    # _QUEUED, _RUNNING (learn.microsoft.com/windows/win32/taskschd/task-scheduler-error-and-
    # success-constants). Any other is the code it ended with.
    $result = (Get-ScheduledTaskInfo -TaskName 'cu-run-network').LastTaskResult
    if ($result -notin @(0x41303, 0x41325, 0x41301) -or $waited.Elapsed.TotalSeconds -gt 60) {
        throw "the forwarder did not start (its task's result: $result): $(Read-ForwarderLog)"
    }
    Start-Sleep -Milliseconds 100
}

$certificate = [Security.Cryptography.X509Certificates.X509Certificate2]::new([Convert]::FromBase64String($CaCert))
$store = [Security.Cryptography.X509Certificates.X509Store]::new('Root', 'LocalMachine')
$store.Open('ReadWrite')
try { $store.Add($certificate) } finally { $store.Close() }

# The desktop user's WinINet settings, in its loaded hive (autologon keeps it logged on): the
# static per-user values (KB226473), which the programs it starts from now on read. The browsers
# and Python are sent to the proxy by their own means too (Policies, HTTP_PROXY).
$sid = ([Security.Principal.NTAccount]::new($DesktopUser)).Translate([Security.Principal.SecurityIdentifier]).Value
$internet = "Registry::HKEY_USERS\$sid\Software\Microsoft\Windows\CurrentVersion\Internet Settings"
if (-not (Test-Path -LiteralPath $internet)) { throw "the settings of $DesktopUser are not loaded: is it logged on?" }
Set-ItemProperty -Path $internet -Name 'ProxyEnable' -Value 1 -Type DWord
Set-ItemProperty -Path $internet -Name 'ProxyServer' -Value $ProxyServer -Type String

# For the processes that read the machine's environment when they start (a new logon, a service,
# what the admin starts): Explorer, already running in the user's session, does not hear of it.
foreach ($name in @('HTTP_PROXY', 'HTTPS_PROXY')) {
    [Environment]::SetEnvironmentVariable($name, "http://$ProxyServer", 'Machine')
}

foreach ($policy in $Policies) {
    $key, $name, $type, $value = $policy -split "`t", 4
    # Made only when missing: New-Item -Force on a key that exists deletes its values first.
    if (-not (Test-Path -LiteralPath $key)) { New-Item -Path $key -Force | Out-Null }
    if ($type -eq 'DWord') { $value = [int]$value }
    Set-ItemProperty -Path $key -Name $name -Value $value -Type $type
}
