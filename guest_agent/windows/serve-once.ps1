# cu-run: runs as the desktop user
<#
  Runs in the autologon user's session (the cu-guest-agent scheduled task): answers every
  pending request in C:\cu-run\spool\guest-agent with cu-guest-agent.ps1, writing .out, .err
  and, last, .rc.
#>
$home_dir = 'C:\cu-run\guest-agent'
foreach ($request in Get-ChildItem -Path 'C:\cu-run\spool\guest-agent' -Filter '*.args') {
    $base = $request.FullName.Substring(0, $request.FullName.Length - 5)
    $arguments = @(Get-Content -LiteralPath $request.FullName -Encoding UTF8 | Where-Object { $_ -ne '' })
    Remove-Item -LiteralPath $request.FullName -Force
    # Start-Process keeps the agent's UTF-8 bytes as they are (5.1's > would re-encode as UTF-16).
    $agent = Join-Path $home_dir 'cu-guest-agent.ps1'
    $argumentList = @('-NoProfile', '-ExecutionPolicy', 'Bypass', '-File', "`"$agent`"") + $arguments
    $process = Start-Process -FilePath 'powershell.exe' -ArgumentList $argumentList -Wait -PassThru -NoNewWindow `
        -RedirectStandardOutput "$base.out" -RedirectStandardError "$base.err"
    Set-Content -LiteralPath "$base.rc" -Value $process.ExitCode
}
