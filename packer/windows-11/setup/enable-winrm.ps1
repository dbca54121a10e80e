<#
  First logon (from autounattend.xml): make WinRM answer on 5985 whatever profile Windows
  gave the network, and let a local administrator's remote session keep its admin token
  (LocalAccountTokenFilterPolicy), which packer and cu-run need. NTLM over HTTP, Basic off.

  - The desktop user (a standard user once provisioning ends) opens its own WinRM shell for
    the agent's tools. A cmd shell is governed by the service's RootSDDL, whose default admits
    only Administrators and Interactive users: without an ACE for Remote Management Users
    (BUILTIN, S-1-5-32-580) that shell gets fault 5, "Access is denied". The ACE is added to
    whatever the SDDL holds, through the security descriptor object, never by string surgery.
  - WinRM keeps Windows' own start type, Automatic (Delayed Start): the service control manager
    starts it about two minutes after the other automatic services (MS-SCMR,
    SERVICE_DELAYED_AUTO_START_INFO). Plain Automatic was tried by rgl/windows-vagrant and
    reverted (commit c61ddf2e, "revert to the default winrm service startup type of
    delayed-auto"; its provision-winrm.ps1 warns that auto "proved to be unreliable"). A warm
    restore does not wait for it; a cold boot's wait for the shell allows for it
    (WindowsProfile.boot_shell_timeout).
  - No restart of WinRM: packer connects as soon as the port answers and may be uploading
    when a restart would cut it off. Every setting below takes effect without one.
#>
$ErrorActionPreference = 'Stop'
Get-NetConnectionProfile | ForEach-Object {
    Set-NetConnectionProfile -InterfaceIndex $_.InterfaceIndex -NetworkCategory Private
}
Enable-PSRemoting -Force -SkipNetworkProfileCheck
Set-Item -Path 'WSMan:\localhost\Service\Auth\Basic' -Value $false
# packer's WinRM client sends NTLM without message encryption; the port is reachable only
# through the host's 127.0.0.1 forward of an isolated VM. cu-run's own client encrypts.
Set-Item -Path 'WSMan:\localhost\Service\AllowUnencrypted' -Value $true
Set-Item -Path 'WSMan:\localhost\MaxTimeoutms' -Value 1800000
Set-Item -Path 'WSMan:\localhost\Shell\MaxMemoryPerShellMB' -Value 2048

$sddl = (Get-Item -Path 'WSMan:\localhost\Service\RootSDDL').Value
$descriptor = New-Object System.Security.AccessControl.CommonSecurityDescriptor($false, $false, $sddl)
$remoteManagementUsers = New-Object System.Security.Principal.SecurityIdentifier('S-1-5-32-580')
# GENERIC_EXECUTE | GENERIC_READ, the rights the default SDDL gives Interactive users: (A;;GXGR;;;RM)
$executeAndRead = [int]0x20000000 -bor [int]0x80000000
$descriptor.DiscretionaryAcl.AddAccess('Allow', $remoteManagementUsers, $executeAndRead, 'None', 'None')
Set-Item -Path 'WSMan:\localhost\Service\RootSDDL' -Value $descriptor.GetSddlForm('All') -Force

$policies = 'HKLM:\SOFTWARE\Microsoft\Windows\CurrentVersion\Policies\System'
New-ItemProperty -Path $policies -Name 'LocalAccountTokenFilterPolicy' -Value 1 -PropertyType DWord -Force | Out-Null
$rule = Get-NetFirewallRule -Name 'WINRM-HTTP-In-TCP' -ErrorAction SilentlyContinue
if ($null -ne $rule) {
    Set-NetFirewallRule -Name 'WINRM-HTTP-In-TCP' -Profile Any -RemoteAddress Any
}
else {
    New-NetFirewallRule -Name 'cu-run-winrm' -DisplayName 'cu-run WinRM' -Direction Inbound `
        -Protocol TCP -LocalPort 5985 -Action Allow -Profile Any | Out-Null
}
# Delayed Start, said explicitly rather than left to Enable-PSRemoting's default (see above).
& sc.exe config WinRM start= delayed-auto | Out-Null
if ($LASTEXITCODE -ne 0) {
    throw "sc.exe config WinRM start= delayed-auto exited $LASTEXITCODE"
}
