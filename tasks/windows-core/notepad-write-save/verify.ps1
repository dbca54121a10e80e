$path = "C:\evals\fox.txt"
$expected = "The quick brown fox jumps over the lazy dog."
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Write-Output "FAIL $path does not exist"
    exit 0
}
# Notepad may add a trailing newline; everything else must match exactly, case included.
$content = (Get-Content -LiteralPath $path -Raw).TrimEnd("`r", "`n")
if ($content -ceq $expected) {
    Write-Output "PASS"
} else {
    Write-Output "FAIL $path holds: $content"
}
