<#
  What the runner calls over WinRM: cu-guest-agent's commands, answered from the
  autologon user's session. Files a request, starts the cu-guest-agent scheduled task
  (serve-once.ps1 in that session), waits for the answer and prints it, exit code and all.
#>
$ErrorActionPreference = 'Stop'
$home_dir = 'C:\cu-run\guest-agent'
$id = [guid]::NewGuid().ToString('N')
$request = Join-Path $home_dir "requests\$id"
Set-Content -LiteralPath "$request.args" -Value ($args -join "`n") -Encoding UTF8
# schtasks.exe, not Start-ScheduledTask: the caller is the desktop user, a standard user, and
# the task's own principal; schtasks runs it through the task's own rights and says why it could not.
& schtasks.exe /run /tn 'cu-guest-agent' | Out-Null
if ($LASTEXITCODE -ne 0) {
    Remove-Item -LiteralPath "$request.args" -Force -ErrorAction SilentlyContinue
    [Console]::Error.WriteLine("cu-guest-agent: schtasks /run /tn cu-guest-agent exited $LASTEXITCODE")
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
