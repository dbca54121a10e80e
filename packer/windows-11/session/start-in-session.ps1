<#
  Starts a program in the desktop user's interactive session, for the admin's scripts (task
  setup, imported benchmarks' launch steps): what WinRM starts runs in session 0, which no
  one sees. A one-shot scheduled task of the desktop user (logon type Interactive, so no
  password) runs it on that user's desktop with that user's rights.

    start-in-session.ps1 -User cu -FilePath notepad.exe -ArgumentList 'C:\evals\a.txt'
    start-in-session.ps1 -User cu -FilePath cmd.exe -ArgumentList '/c','dir' -Wait

  Without -Wait it returns once the program has started; with -Wait, once it has ended, with
  its exit code. The task is removed either way; removing it does not stop what it started.
#>
param(
    [Parameter(Mandatory = $true)][string]$User,
    [Parameter(Mandatory = $true)][string]$FilePath,
    [string[]]$ArgumentList = @(),
    [switch]$Wait,
    [int]$TimeoutSeconds = 120
)
$ErrorActionPreference = 'Stop'

function ConvertTo-CommandLineArgument([string]$Text) {
    # The quoting CommandLineToArgvW undoes: backslashes before a quote are doubled, quotes escaped.
    if ($Text -and $Text -notmatch '[\s"]') { return $Text }
    $escaped = $Text -replace '(\\*)"', '$1$1\"' -replace '(\\+)$', '$1$1'
    return '"' + $escaped + '"'
}

$name = 'cu-session-' + [guid]::NewGuid().ToString('N')
$line = ($ArgumentList | ForEach-Object { ConvertTo-CommandLineArgument $_ }) -join ' '
$action = if ($line) { New-ScheduledTaskAction -Execute $FilePath -Argument $line }
          else { New-ScheduledTaskAction -Execute $FilePath }
$principal = New-ScheduledTaskPrincipal -UserId $User -LogonType Interactive -RunLevel Limited
# No time limit: an app the task starts must outlive the default 72 h as much as the episode.
$settings = New-ScheduledTaskSettingsSet -ExecutionTimeLimit ([TimeSpan]::Zero) -AllowStartIfOnBatteries `
    -DontStopIfGoingOnBatteries
Register-ScheduledTask -TaskName $name -Action $action -Principal $principal -Settings $settings | Out-Null
try {
    $started = Get-Date
    & schtasks.exe /run /tn $name | Out-Null
    if ($LASTEXITCODE -ne 0) { throw "schtasks /run /tn $name exited $LASTEXITCODE" }
    $deadline = $started.AddSeconds($TimeoutSeconds)
    # Started: the task ran (LastRunTime moves). Ended (-Wait): the state, read first, is not
    # Running, and the result, read after it, is not SCHED_S_TASK_RUNNING (267009). Read the other
    # way round, a task that ended between the two reads left 267009 as its "exit code"; and the
    # scheduler need not write the result before the state, so 267009 means running whichever says so.
    $stillRunning = 267009
    while ($true) {
        $state = (Get-ScheduledTask -TaskName $name).State
        $info = Get-ScheduledTaskInfo -TaskName $name
        $ran = $info.LastRunTime -ge $started.AddSeconds(-1)
        $ended = $state -ne 'Running' -and $info.LastTaskResult -ne $stillRunning
        if ($ran -and (-not $Wait -or $ended)) { break }
        if ((Get-Date) -gt $deadline) {
            throw "$FilePath did not $(if ($Wait) { 'finish' } else { 'start' }) in ${User}'s session within $TimeoutSeconds s (is $User logged on?)"
        }
        Start-Sleep -Milliseconds 200
    }
    # A crash's 0xC0000005 does not fit [int] as a number: its low 32 bits are kept as they are.
    if ($Wait) { exit [BitConverter]::ToInt32([BitConverter]::GetBytes([int64]$info.LastTaskResult), 0) }
}
finally {
    Unregister-ScheduledTask -TaskName $name -Confirm:$false -ErrorAction SilentlyContinue
}
