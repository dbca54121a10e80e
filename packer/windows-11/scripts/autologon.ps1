# Permanent autologon: the desktop must be there after every boot of every clone.
# autounattend.xml's AutoLogon has no LogonCount; Winlogon's own AutoLogonCount would
# still switch it off after N logons, so it is removed here.
$ErrorActionPreference = 'Stop'
$winlogon = 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon'
Set-ItemProperty -Path $winlogon -Name 'AutoAdminLogon' -Value '1'
Set-ItemProperty -Path $winlogon -Name 'DefaultUserName' -Value $env:CU_USER
Set-ItemProperty -Path $winlogon -Name 'DefaultPassword' -Value $env:CU_PASSWORD
Set-ItemProperty -Path $winlogon -Name 'DefaultDomainName' -Value $env:COMPUTERNAME
Remove-ItemProperty -Path $winlogon -Name 'AutoLogonCount' -ErrorAction SilentlyContinue
# No lock screen and no password prompt on wake: nothing may stand between boot and desktop.
New-Item -Path 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\Personalization' -Force | Out-Null
Set-ItemProperty -Path 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\Personalization' -Name 'NoLockScreen' -Value 1 -Type DWord
powercfg /SETACVALUEINDEX SCHEME_CURRENT SUB_NONE CONSOLELOCK 0
