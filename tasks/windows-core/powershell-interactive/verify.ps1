$path = "C:\evals\today.txt"
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Verdict fail "$path does not exist"
}
$value = (Get-Content -LiteralPath $path -Raw).Trim()
$today = Get-Date -Format "yyyy-MM-dd"
if ($value -eq $today) {
    Verdict pass
} else {
    Verdict fail "$path holds '$value', today is $today"
}
