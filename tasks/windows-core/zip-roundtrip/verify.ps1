$zip = "C:\evals\archive.zip"
if (-not (Test-Path -LiteralPath $zip -PathType Leaf)) {
    Write-Output "FAIL $zip does not exist"
    exit 0
}
Add-Type -AssemblyName System.IO.Compression.FileSystem
try {
    $archive = [System.IO.Compression.ZipFile]::OpenRead($zip)
} catch {
    Write-Output "FAIL $zip is not a readable zip archive"
    exit 0
}
$names = @($archive.Entries | ForEach-Object { $_.FullName } | Sort-Object)
$archive.Dispose()
if (($names -join ",") -ne "a.txt,b.txt,c.txt") {
    Write-Output "FAIL the archive holds: $($names -join ', ')"
    exit 0
}
$out = Join-Path $env:TEMP ("zipcheck-" + [guid]::NewGuid())
Expand-Archive -LiteralPath $zip -DestinationPath $out
foreach ($name in @("a.txt", "b.txt", "c.txt")) {
    $a = (Get-FileHash -LiteralPath (Join-Path $out $name)).Hash
    $b = (Get-FileHash -LiteralPath (Join-Path "C:\evals\zipme" $name)).Hash
    if ($a -ne $b) {
        Write-Output "FAIL $name in the archive differs from zipme\$name"
        exit 0
    }
}
Remove-Item -Recurse -Force $out
Write-Output "PASS"
