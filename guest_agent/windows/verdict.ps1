# cu-run: runs as the verifier account
# The verdict helper (runner.scoring.verdict): defines Verdict for a verify, checkpoint or safety
# script, which follows it in the same PowerShell, after the privileged prelude
# (runner.tasks.scripts: run_verifier). Dot-sourced: the function is the script's.
#   Verdict pass          records a pass, unless a fail is recorded, and ends the script
#   Verdict fail REASON   records a fail and its reason, unless one is recorded, and ends the script
# A fail, once recorded, stands. The record is two files where only the admin can write; agent
# text in REASON cannot forge a pass. verdict-record.ps1 reads it back.
#
# Parameters (it stays, for the helper):
#   CuRunVerdict  the record's path, without its .pass or .fail
param([string]$CuRunVerdict = '')
# `exit` in a function ends the whole script, as the sh helper's does.
function Verdict {
    param([Parameter(Mandatory = $true)][ValidateSet('pass', 'fail')][string]$Kind,
          [Parameter(ValueFromRemainingArguments = $true)][string[]]$Reason)
    if (-not (Test-Path -LiteralPath ($CuRunVerdict + '.fail'))) {
        if ($Kind -eq 'fail') {
            $text = ($Reason -join ' ')
            if (-not $text) { $text = 'no reason given' }
            [IO.File]::WriteAllText($CuRunVerdict + '.fail', $text)
        } else { [IO.File]::WriteAllText($CuRunVerdict + '.pass', '') }
    }
    exit 0
}
