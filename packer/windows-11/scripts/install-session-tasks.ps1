# What must run in the desktop user's interactive session, not in WinRM's session 0:
# - cu-screen, at every logon of the desktop user: the screen size the image manifest records
#   (session\set-screen.ps1, which logs what it found and did);
# - session\start-in-session.ps1, for the admin's scripts (setup, imported tasks' launch
#   steps): a one-shot task of the desktop user per program.
# Only administrators and SYSTEM may change these scripts; the desktop user may read and run them:
# C:\cu-run's own ACL, which install-guest-agent.ps1 set before this script runs.
$ErrorActionPreference = 'Stop'
$session = 'C:\cu-run\session'
if (-not (Get-Acl -LiteralPath 'C:\cu-run').AreAccessRulesProtected) {
    throw 'C:\cu-run still inherits from C:\ (install-guest-agent.ps1 sets its ACL and runs first)'
}
# The user writes its own screen log, in the spool, from which nothing is run.
$log = 'C:\cu-run\spool\screen.log'
Set-Content -LiteralPath $log -Value ''
& icacls.exe $log /grant "$($env:CU_USER):M" /Q | Out-Null
if ($LASTEXITCODE -ne 0) { throw "icacls $log exited $LASTEXITCODE" }

$arguments = "-NoProfile -ExecutionPolicy Bypass -WindowStyle Hidden -File $session\set-screen.ps1 " +
    "-Width $env:CU_SCREEN_WIDTH -Height $env:CU_SCREEN_HEIGHT"
$action = New-ScheduledTaskAction -Execute 'powershell.exe' -Argument $arguments
$trigger = New-ScheduledTaskTrigger -AtLogOn -User $env:CU_USER
$principal = New-ScheduledTaskPrincipal -UserId $env:CU_USER -LogonType Interactive -RunLevel Limited
$settings = New-ScheduledTaskSettingsSet -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries `
    -ExecutionTimeLimit (New-TimeSpan -Minutes 2)
Register-ScheduledTask -TaskName 'cu-screen' -Action $action -Trigger $trigger -Principal $principal `
    -Settings $settings -Force | Out-Null
