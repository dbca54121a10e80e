$path = "C:\evals\result.txt"
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Write-Output "FAIL $path does not exist"
    exit 0
}
$value = (Get-Content -LiteralPath $path -Raw).Trim()
if ($value -eq "53361") {
    Write-Output "PASS"
} else {
    Write-Output "FAIL $path holds '$value', not 53361"
}
