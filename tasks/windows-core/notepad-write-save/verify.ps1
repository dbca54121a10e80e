$path = "C:\evals\fox.txt"
$expected = "The quick brown fox jumps over the lazy dog."
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Verdict fail "$path does not exist"
}
# Notepad may add a trailing newline; everything else must match exactly, case included.
$content = (Get-Content -LiteralPath $path -Raw).TrimEnd("`r", "`n")
if ($content -ceq $expected) {
    Verdict pass
} else {
    Verdict fail "$path holds: $content"
}
