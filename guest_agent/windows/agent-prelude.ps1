# cu-run: runs as the desktop user
# The agent's prelude: what runs before the oracle, in the same PowerShell, the desktop user's own
# (runner.tasks.scripts: run_as_agent): $env:TASK_DIR set, the user's home entered.
#
# Parameters:
#   TaskDir  the task's staged files
param([string]$TaskDir = '')
$env:TASK_DIR = $TaskDir
Set-Location -LiteralPath $env:USERPROFILE
