$path = "C:\evals\result.txt"
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Verdict fail "$path does not exist"
}
$value = (Get-Content -LiteralPath $path -Raw).Trim()
if ($value -eq "53361") {
    Verdict pass
} else {
    Verdict fail "$path holds '$value', not 53361"
}
