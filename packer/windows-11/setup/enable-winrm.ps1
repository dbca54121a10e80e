<#
  First logon (from autounattend.xml): make WinRM answer on 5985 whatever profile Windows
  gave the network, and let a local administrator's remote session keep its admin token
  (LocalAccountTokenFilterPolicy), which packer and cu-run need. NTLM over HTTP, Basic off.
#>
$ErrorActionPreference = 'Stop'
Get-NetConnectionProfile | ForEach-Object {
    Set-NetConnectionProfile -InterfaceIndex $_.InterfaceIndex -NetworkCategory Private
}
Enable-PSRemoting -Force -SkipNetworkProfileCheck
Set-Item -Path 'WSMan:\localhost\Service\Auth\Basic' -Value $false
# packer's WinRM client sends NTLM without message encryption; the port is reachable only
# through the host's 127.0.0.1 forward of an isolated VM.
Set-Item -Path 'WSMan:\localhost\Service\AllowUnencrypted' -Value $true
Set-Item -Path 'WSMan:\localhost\MaxTimeoutms' -Value 1800000
Set-Item -Path 'WSMan:\localhost\Shell\MaxMemoryPerShellMB' -Value 2048
New-ItemProperty -Path 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Policies\System' `
    -Name 'LocalAccountTokenFilterPolicy' -Value 1 -PropertyType DWord -Force | Out-Null
$rule = Get-NetFirewallRule -Name 'WINRM-HTTP-In-TCP' -ErrorAction SilentlyContinue
if ($null -ne $rule) {
    Set-NetFirewallRule -Name 'WINRM-HTTP-In-TCP' -Profile Any -RemoteAddress Any
}
else {
    New-NetFirewallRule -Name 'cu-run-winrm' -DisplayName 'cu-run WinRM' -Direction Inbound `
        -Protocol TCP -LocalPort 5985 -Action Allow -Profile Any | Out-Null
}
Set-Service -Name WinRM -StartupType Automatic
Restart-Service -Name WinRM
