$root = "C:\evals\projects"
foreach ($sub in @("alpha\docs", "beta\docs")) {
    $path = Join-Path $root $sub
    if (-not (Test-Path -LiteralPath $path -PathType Container)) {
        Verdict fail "$path is not a folder"
    }
}
$found = Get-ChildItem -LiteralPath $root -Recurse -Force | ForEach-Object { $_.FullName.Substring($root.Length + 1) } | Sort-Object
$want = @("alpha", "alpha\docs", "beta", "beta\docs")
if (Compare-Object -ReferenceObject $want -DifferenceObject @($found)) {
    Verdict fail "unexpected contents of ${root}: $($found -join ', ')"
}
Verdict pass
