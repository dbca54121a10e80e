$ErrorActionPreference = "Stop"
New-Item -ItemType Directory -Force -Path "C:\evals" | Out-Null
Remove-Item -Recurse -Force -ErrorAction SilentlyContinue "C:\evals\projects"
