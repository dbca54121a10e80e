# cu-run: runs as the verifier account
# Prints what the verdict helper (verdict.ps1) recorded: "pass", or "fail", a line break and the
# reason (its first MaxChars characters: it may hold agent data of any size); nothing when it
# recorded nothing. Through the admin channel, after a verify, checkpoint or safety script: as a
# command of its own (runner.profiles.windows: verdict_read_script, Boundary empty), or after the
# script in the same command (verdict_trailer: an empty line and Boundary first).
#
# Parameters:
#   Record    the record's path, without its .pass or .fail
#   Boundary  printed on a line of its own, after an empty one, before the record; or empty
#   MaxChars  the characters of a reason printed
param(
    [string]$Record = '',
    [string]$Boundary = '',
    [int]$MaxChars = 0
)
if ($Boundary) { Write-Output ''; Write-Output $Boundary }
if (Test-Path -LiteralPath ($Record + '.fail')) {
    Write-Output 'fail'
    $r = [IO.File]::ReadAllText($Record + '.fail')
    Write-Output $r.Substring(0, [Math]::Min($r.Length, $MaxChars))
}
elseif (Test-Path -LiteralPath ($Record + '.pass')) { Write-Output 'pass' }
