$root = "C:\evals\projects"
foreach ($sub in @("alpha\docs", "beta\docs")) {
    $path = Join-Path $root $sub
    if (-not (Test-Path -LiteralPath $path -PathType Container)) {
        Write-Output "FAIL $path is not a folder"
        exit 0
    }
}
$found = Get-ChildItem -LiteralPath $root -Recurse -Force | ForEach-Object { $_.FullName.Substring($root.Length + 1) } | Sort-Object
$want = @("alpha", "alpha\docs", "beta", "beta\docs")
if (Compare-Object -ReferenceObject $want -DifferenceObject @($found)) {
    Write-Output "FAIL unexpected contents of ${root}: $($found -join ', ')"
    exit 0
}
Write-Output "PASS"
