$ErrorActionPreference = "Stop"
. (Join-Path $env:TASK_DIR "config.ps1")
Remove-Item -Recurse -Force -ErrorAction SilentlyContinue $Service, "C:\evals\backup"
foreach ($dir in @("$Service\conf.d", "$Service\old", "C:\evals\backup")) {
    New-Item -ItemType Directory -Force -Path $dir | Out-Null
}
Set-Content -LiteralPath "$Service\run.cmd" -Value "@inventory.exe --config $Real" -NoNewline
foreach ($file in @($Real) + $Decoys) {
    [System.IO.File]::WriteAllText($file, (Get-BrokenConfig))
}
