# The guest agent (guest_agent/windows) runs in the autologon user's session: UI Automation
# sees the desktop only from there, never from WinRM's session 0. A scheduled task of that
# user runs serve-once.ps1 on demand; invoke.ps1 (what the runner calls over WinRM) files a
# request, starts the task and waits for the answer.
$ErrorActionPreference = 'Stop'
$home_dir = 'C:\cu-run\guest-agent'
New-Item -ItemType Directory -Path (Join-Path $home_dir 'requests') -Force | Out-Null
# The autologon user writes answers; only administrators and that user may read them.
icacls $home_dir /inheritance:r /grant:r "Administrators:(OI)(CI)F" "SYSTEM:(OI)(CI)F" "$($env:CU_USER):(OI)(CI)M" | Out-Null

$action = New-ScheduledTaskAction -Execute 'conhost.exe' `
    -Argument "--headless powershell.exe -NoProfile -ExecutionPolicy Bypass -File $home_dir\serve-once.ps1"
$principal = New-ScheduledTaskPrincipal -UserId $env:CU_USER -LogonType Interactive -RunLevel Limited
$settings = New-ScheduledTaskSettingsSet -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries `
    -ExecutionTimeLimit (New-TimeSpan -Minutes 5) -MultipleInstances Queue
Register-ScheduledTask -TaskName 'cu-guest-agent' -Action $action -Principal $principal -Settings $settings -Force |
    Out-Null
