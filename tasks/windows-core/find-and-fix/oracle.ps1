$ErrorActionPreference = "Stop"
$path = "C:\evals\service\conf.d\app.conf"
[System.IO.File]::WriteAllText($path, [System.IO.File]::ReadAllText($path).Replace("port = 80800", "port = 8080"))
