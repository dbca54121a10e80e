# cu-run: runs as the verifier account
# Prints the desktop user's processes, one word each as PID:START (its start time in UTC ticks),
# so a PID reused for another process is another process (runner.scoring.quarantine:
# user_processes, the ones a quarantine spares).
#
# Parameters:
#   UserName  the desktop user's account name
param(
    [string]$UserName = ''
)
Get-Process -IncludeUserName | Where-Object { $_.UserName -like ('*\' + $UserName) } | ForEach-Object {
    "$($_.Id):$($_.StartTime.ToUniversalTime().Ticks)"
}
