$ErrorActionPreference = "Stop"
Compress-Archive -Path "C:\evals\zipme\a.txt", "C:\evals\zipme\b.txt", "C:\evals\zipme\c.txt" -DestinationPath "C:\evals\archive.zip" -Force
