# cu-run: runs as the verifier account
# (and as the desktop user, for the oracle's files)
# Removes Folder and what it holds, after a task's script ran from it (runner.tasks.scripts).
# Never fails: a folder already gone is what was wanted.
#
# Parameters:
#   Folder  the staging folder to remove
param(
    [string]$Folder = ''
)
Remove-Item -LiteralPath $Folder -Recurse -Force -ErrorAction SilentlyContinue
