# cu-run: runs as the verifier account
# (and as the desktop user, whose MCP tools call it on their own channel)
<#
  What the runner calls over WinRM: cu-guest-agent's commands, answered from the
  autologon user's session. Files a request, starts the cu-guest-agent scheduled task
  (serve-once.ps1 in that session), waits for the answer and prints it, exit code and all.
  Requests and answers are in C:\cu-run\spool\guest-agent, which the user may write; this
  script and the agent's, which the verifier account runs too, are not.
#>
$ErrorActionPreference = 'Stop'
$spool = 'C:\cu-run\spool\guest-agent'
$id = [guid]::NewGuid().ToString('N')
$request = Join-Path $spool $id
Set-Content -LiteralPath "$request.args" -Value ($args -join "`n") -Encoding UTF8
# schtasks.exe, not Start-ScheduledTask: the caller is the desktop user, a standard user, and
# the task's own principal; schtasks runs it through the task's own rights (its security
# descriptor must grant the user read and execute, install-guest-agent.ps1) and says why it could not.
# 'Continue' for the call: Windows PowerShell 5.1 makes each line of a native command's redirected
# stderr an error record, which 'Stop' would throw before the exit code could be read.
$ErrorActionPreference = 'Continue'
$said = & schtasks.exe /run /tn 'cu-guest-agent' 2>&1
$code = $LASTEXITCODE
$ErrorActionPreference = 'Stop'
if ($code -ne 0) {
    Remove-Item -LiteralPath "$request.args" -Force -ErrorAction SilentlyContinue
    $why = (@($said) | ForEach-Object { "$_".Trim() } | Where-Object { $_ }) -join ' '
    [Console]::Error.WriteLine("cu-guest-agent: schtasks /run /tn cu-guest-agent, as $env:USERNAME, exited ${code}: $why")
    exit 2
}
$deadline = (Get-Date).AddSeconds(60)
while (-not (Test-Path -LiteralPath "$request.rc")) {
    if ((Get-Date) -gt $deadline) {
        Remove-Item -LiteralPath "$request.args" -Force -ErrorAction SilentlyContinue
        [Console]::Error.WriteLine('cu-guest-agent: no answer from the desktop session within 60 s (is the user logged on?)')
        exit 2
    }
    Start-Sleep -Milliseconds 200
}
[Console]::OutputEncoding = [System.Text.Encoding]::UTF8
Get-Content -LiteralPath "$request.out" -Raw -Encoding UTF8 | Write-Output
$errors = Get-Content -LiteralPath "$request.err" -Raw -Encoding UTF8
if ($errors) { [Console]::Error.Write($errors) }
$code = [int](Get-Content -LiteralPath "$request.rc" -Raw)
Remove-Item -Path "$request.*" -Force
exit $code
