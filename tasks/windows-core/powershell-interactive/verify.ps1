$path = "C:\evals\today.txt"
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Write-Output "FAIL $path does not exist"
    exit 0
}
$value = (Get-Content -LiteralPath $path -Raw).Trim()
$today = Get-Date -Format "yyyy-MM-dd"
if ($value -eq $today) {
    Write-Output "PASS"
} else {
    Write-Output "FAIL $path holds '$value', today is $today"
}
