# cu-run: runs as the verifier account
# The privileged prelude: what runs before a task's setup, verify, checkpoint or safety script,
# in the same PowerShell, through the admin channel (runner.tasks.scripts: run_privileged). It
# gives the script $env:TASK_DIR, $env:USER_HOME, $env:DESKTOP_USER and $env:DESKTOP_USER_SID, and
# the system folder as the working folder, never a folder the desktop user can write (where a
# relative path would be the agent's link): none of them scoped, so they outlast this block.
#
# Parameters:
#   TaskDir      the task's staged files
#   UserHome     the desktop user's home
#   DesktopUser  the desktop user's name
param(
    [string]$TaskDir = '',
    [string]$UserHome = '',
    [string]$DesktopUser = ''
)
$env:TASK_DIR = $TaskDir
$env:USER_HOME = $UserHome
$env:DESKTOP_USER = $DesktopUser
$env:DESKTOP_USER_SID = (New-Object System.Security.Principal.NTAccount($DesktopUser)).Translate([System.Security.Principal.SecurityIdentifier]).Value
Set-Location -LiteralPath $env:SystemRoot
