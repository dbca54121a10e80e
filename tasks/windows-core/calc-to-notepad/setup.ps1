New-Item -ItemType Directory -Force -Path "C:\evals" | Out-Null
Remove-Item -Force -ErrorAction SilentlyContinue "C:\evals\result.txt"
