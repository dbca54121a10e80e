$zip = "C:\evals\archive.zip"
if (-not (Test-Path -LiteralPath $zip -PathType Leaf)) {
    Verdict fail "$zip does not exist"
}
Add-Type -AssemblyName System.IO.Compression.FileSystem
try {
    $archive = [System.IO.Compression.ZipFile]::OpenRead($zip)
} catch {
    Verdict fail "$zip is not a readable zip archive"
}
$names = @($archive.Entries | ForEach-Object { $_.FullName } | Sort-Object)
$archive.Dispose()
if (($names -join ",") -ne "a.txt,b.txt,c.txt") {
    Verdict fail "the archive holds: $($names -join ', ')"
}
$out = Join-Path $env:TEMP ("zipcheck-" + [guid]::NewGuid())
Expand-Archive -LiteralPath $zip -DestinationPath $out
foreach ($name in @("a.txt", "b.txt", "c.txt")) {
    $a = (Get-FileHash -LiteralPath (Join-Path $out $name)).Hash
    $b = (Get-FileHash -LiteralPath (Join-Path "C:\evals\zipme" $name)).Hash
    if ($a -ne $b) {
        Verdict fail "$name in the archive differs from zipme\$name"
    }
}
Remove-Item -Recurse -Force $out
Verdict pass
