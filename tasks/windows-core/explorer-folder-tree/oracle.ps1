$ErrorActionPreference = "Stop"
New-Item -ItemType Directory -Force -Path "C:\evals\projects\alpha\docs" | Out-Null
New-Item -ItemType Directory -Force -Path "C:\evals\projects\beta\docs" | Out-Null
