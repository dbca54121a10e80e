# cu-run: runs as the verifier account
# (and as the desktop user: WinRmShell puts it before every script it runs, on either channel)
# Output as UTF-8, and no progress records, which would reach the runner as CLIXML on stderr.
$ProgressPreference = 'SilentlyContinue'
[Console]::OutputEncoding = [System.Text.Encoding]::UTF8
$OutputEncoding = [System.Text.Encoding]::UTF8
