$ErrorActionPreference = "Stop"
Remove-Item -Recurse -Force -ErrorAction SilentlyContinue "C:\evals\zipme", "C:\evals\archive.zip"
New-Item -ItemType Directory -Force -Path "C:\evals\zipme" | Out-Null
Set-Content -LiteralPath "C:\evals\zipme\a.txt" -Value "alpha contents"
Set-Content -LiteralPath "C:\evals\zipme\b.txt" -Value "bravo contents"
Set-Content -LiteralPath "C:\evals\zipme\c.txt" -Value "charlie contents"
