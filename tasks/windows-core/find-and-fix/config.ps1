# The files of this task, shared by setup and verify: the real config and its decoys.
$Service = "C:\evals\service"
$Real = "$Service\conf.d\app.conf"
$Decoys = @("$Service\conf.d\app.conf.bak", "$Service\app.conf.example", "$Service\old\app.conf", "C:\evals\backup\app.conf")

function Get-BrokenConfig {
    "# app configuration`r`nname = inventory`r`nhost = 127.0.0.1`r`nport = 80800`r`nworkers = 4`r`n"
}

function Get-FixedConfig {
    (Get-BrokenConfig).Replace("port = 80800", "port = 8080")
}
