$ErrorActionPreference = "Stop"
Set-Content -LiteralPath "C:\evals\fox.txt" -Value "The quick brown fox jumps over the lazy dog." -Encoding UTF8
