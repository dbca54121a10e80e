. (Join-Path $env:TASK_DIR "config.ps1")
function Read-Text($path) {
    if (Test-Path -LiteralPath $path -PathType Leaf) { [System.IO.File]::ReadAllText($path) } else { $null }
}
# Editors may change line endings; compare lines, not bytes, for the fixed file.
$real = Read-Text $Real
if ($null -eq $real -or (($real -split "`r?`n") -join "`n") -cne (((Get-FixedConfig) -split "`r?`n") -join "`n")) {
    Verdict fail "$Real is not the original with port = 8080"
}
foreach ($decoy in $Decoys) {
    if ((Read-Text $decoy) -cne (Get-BrokenConfig)) {
        Verdict fail "the decoy $decoy was changed or removed"
    }
}
Verdict pass
