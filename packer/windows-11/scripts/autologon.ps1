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
# The key is made only when missing: New-Item -Force on an existing key deletes it first
# (its values and subkeys); on a missing one it makes the missing parents too.
$personalization = 'HKLM:\SOFTWARE\Policies\Microsoft\Windows\Personalization'
if (-not (Test-Path -LiteralPath $personalization)) { New-Item -Path $personalization -Force | Out-Null }
Set-ItemProperty -Path $personalization -Name 'NoLockScreen' -Value 1 -Type DWord
powercfg /SETACVALUEINDEX SCHEME_CURRENT SUB_NONE CONSOLELOCK 0
