# cu-run: runs as the verifier account
# The quarantine (runner.scoring.quarantine), through the admin channel, after the agent's turn.
# Whole sessions cannot be frozen: the desktop user's processes that are not in Keep are stopped,
# and its console shells, which the agent could type into, even when they ran before the agent.
# Twenty rounds at most: a process stopped may have started another.
#
# Parameters:
#   UserName  the desktop user's name
#   Keep      the processes that ran before the agent, each "PID:START" (processes_script's
#             words); empty: all of the user's
param(
    [string]$UserName = '',
    [string[]]$Keep = @()
)
# Console shells the agent could type into: stopped even when they ran before the agent.
$shells = @('cmd', 'powershell', 'pwsh', 'WindowsTerminal', 'OpenConsole', 'bash', 'wsl')
$owner = '*\' + $UserName
foreach ($round in 1..20) {
    $new = @(Get-Process -IncludeUserName | Where-Object { $_.UserName -like $owner -and ($shells -contains $_.ProcessName -or $Keep -notcontains "$($_.Id):$($_.StartTime.ToUniversalTime().Ticks)") })
    if ($new.Count -eq 0) { break }
    $new | Stop-Process -Force -ErrorAction SilentlyContinue
    Start-Sleep -Milliseconds 100
}
Write-Output "stopped the desktop user's processes started during the episode, and its console shells"
