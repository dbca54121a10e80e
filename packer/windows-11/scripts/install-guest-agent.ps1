# The guest agent (guest_agent/windows) runs in the autologon user's session: UI Automation
# sees the desktop only from there, never from WinRM's session 0. A scheduled task of that
# user runs serve-once.ps1 on demand; invoke.ps1 (what the runner calls over WinRM) files a
# request, starts the task and waits for the answer.
#
# C:\cu-run holds what the admin and the verifier account run: session\start-in-session.ps1 in
# every task's setup, guest-agent\invoke.ps1 in WindowsAgentArena's collect steps. The desktop
# user, whom the agent acts as, may read and run it and never change it: a script it could
# rewrite would run with the verifier's rights. C:\cu-run inherits "Authenticated Users: Modify"
# from C:\, so it gets an ACL of its own (SYSTEM and Administrators full control, Users read and
# execute, nothing inherited), every item below it takes that ACL, and Administrators own it all
# (an owner may rewrite an item's ACL whatever it says). What the user must write is in
# C:\cu-run\spool, from which nothing is run. This script runs before install-session-tasks.ps1.
# Accounts are named by SID where Windows names them in its own language ('Administratoren').
$ErrorActionPreference = 'Stop'

function Invoke-Icacls {
    & icacls.exe @args | Out-Null
    if ($LASTEXITCODE -ne 0) { throw "icacls $($args -join ' ') exited $LASTEXITCODE" }
}

New-Item -ItemType Directory -Path 'C:\cu-run\spool\guest-agent' -Force | Out-Null
Invoke-Icacls 'C:\cu-run' /setowner '*S-1-5-32-544' /T /C /Q
Invoke-Icacls 'C:\cu-run' /inheritance:r /grant:r '*S-1-5-18:(OI)(CI)F' '*S-1-5-32-544:(OI)(CI)F' '*S-1-5-32-545:(OI)(CI)RX' /Q
Invoke-Icacls 'C:\cu-run\*' /reset /T /C /Q

# The guest agent's requests: invoke.ps1 (as whoever calls it) files NAME.args and removes the
# answer; serve-once.ps1 (as the user) removes NAME.args and writes NAME.out, .err and .rc. The
# user may add files here and change or remove any file, but not add a folder (a junction
# included) nor remove or rename this one, nor change its ACL (Administrators own it).
Invoke-Icacls 'C:\cu-run\spool\guest-agent' /grant "$($env:CU_USER):(WD)" "$($env:CU_USER):(OI)(IO)M" /Q

# Folders only administrators may enter, made here so that no episode makes one where the desktop
# user could have put something first (a folder of its own, a junction):
# - C:\cu-run\staging, where each privileged task script is staged (runner/profiles/windows.py);
# - C:\ProgramData\cu-run, where WindowsAgentArena's collector gathers the evidence it scores.
#   Users may create folders in C:\ProgramData, so one the user made first would be the user's.
New-Item -ItemType Directory -Path 'C:\cu-run\staging' -Force | Out-Null
New-Item -ItemType Directory -Path 'C:\ProgramData\cu-run' -Force | Out-Null
Invoke-Icacls 'C:\cu-run\staging' /setowner '*S-1-5-32-544' /T /C /Q
Invoke-Icacls 'C:\cu-run\staging' /inheritance:r /grant:r '*S-1-5-18:(OI)(CI)F' '*S-1-5-32-544:(OI)(CI)F' /Q
Invoke-Icacls 'C:\ProgramData\cu-run' /setowner '*S-1-5-32-544' /T /C /Q
Invoke-Icacls 'C:\ProgramData\cu-run' /inheritance:r /grant:r '*S-1-5-18:(OI)(CI)F' '*S-1-5-32-544:(OI)(CI)F' /Q

$action = New-ScheduledTaskAction -Execute 'conhost.exe' `
    -Argument '--headless powershell.exe -NoProfile -ExecutionPolicy Bypass -File C:\cu-run\guest-agent\serve-once.ps1'
$principal = New-ScheduledTaskPrincipal -UserId $env:CU_USER -LogonType Interactive -RunLevel Limited
$settings = New-ScheduledTaskSettingsSet -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries `
    -ExecutionTimeLimit (New-TimeSpan -Minutes 5) -MultipleInstances Queue
Register-ScheduledTask -TaskName 'cu-guest-agent' -Action $action -Principal $principal -Settings $settings -Force |
    Out-Null

# The desktop user starts this task itself (invoke.ps1's schtasks /run, on the user's own WinRM
# channel), and is a standard user once the build ends: since Windows 10 1607 such a user may run
# only a task whose security descriptor grants it read and execute, and this one was registered by
# an administrator. The descriptor is written whole: SYSTEM and Administrators full access, the
# user GENERIC_READ and GENERIC_EXECUTE (GRGX) and nothing more; 0x10 (TASK_DONT_ADD_PRINCIPAL_ACE)
# keeps the scheduler from adding an ACE of its own for the task's principal.
$sid = (New-Object System.Security.Principal.NTAccount($env:CU_USER)).Translate(
    [System.Security.Principal.SecurityIdentifier]).Value
$taskSddl = "O:BAG:SYD:P(A;;FA;;;SY)(A;;FA;;;BA)(A;;GRGX;;;$sid)"
$scheduler = New-Object -ComObject 'Schedule.Service'
$scheduler.Connect()
$scheduler.GetFolder('\').GetTask('cu-guest-agent').SetSecurityDescriptor($taskSddl, 0x10)
$granted = $scheduler.GetFolder('\').GetTask('cu-guest-agent').GetSecurityDescriptor(4)  # the DACL
if (-not $granted.Contains($sid)) {
    throw "cu-guest-agent's security descriptor does not grant $($env:CU_USER) ($sid): $granted"
}
