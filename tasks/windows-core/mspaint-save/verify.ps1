$path = "C:\evals\drawing.png"
if (-not (Test-Path -LiteralPath $path -PathType Leaf)) {
    Verdict fail "$path does not exist"
}
$size = (Get-Item -LiteralPath $path).Length
if ($size -le 1024) {
    Verdict fail "$path is only $size bytes (needs over 1 KiB)"
}
$stream = [System.IO.File]::OpenRead($path)
$magic = New-Object byte[] 8
$null = $stream.Read($magic, 0, 8)
$stream.Dispose()
if (($magic -join ",") -ne "137,80,78,71,13,10,26,10") {
    Verdict fail "$path is not a PNG (starts with $($magic -join ','))"
}
Verdict pass
