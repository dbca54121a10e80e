# cu-run: runs as the verifier account
# (and as the desktop user, for the oracle's files)
# Makes Folder afresh, readable only by the account running this (and SYSTEM): inheritance off;
# then the folders in Subfolders, for a task's files copied one by one after it
# (runner.tasks.scripts: _stage). Fails when it cannot.
#
# Parameters:
#   Folder      the folder made afresh
#   Subfolders  the folders made in it (paths that begin with Folder)
param(
    [string]$Folder = '',
    [string[]]$Subfolders = @()
)
$ErrorActionPreference = 'Stop'
Remove-Item -LiteralPath $Folder -Recurse -Force -ErrorAction SilentlyContinue
New-Item -ItemType Directory -Force -Path $Folder | Out-Null
icacls $Folder /inheritance:r /grant:r "$($env:USERNAME):(OI)(CI)F" 'SYSTEM:(OI)(CI)F' | Out-Null
foreach ($subfolder in $Subfolders) { New-Item -ItemType Directory -Force -Path $subfolder | Out-Null }
