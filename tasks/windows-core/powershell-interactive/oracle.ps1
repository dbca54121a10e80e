Get-Date -Format "yyyy-MM-dd" | Set-Content -LiteralPath "C:\evals\today.txt"
