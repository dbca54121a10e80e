Set-Content -LiteralPath "C:\evals\result.txt" -Value (231 * 231)
