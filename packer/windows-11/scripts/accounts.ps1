# The last provisioning step: who may do what in every clone.
# - The desktop user (autologon; the agent acts as this user) keeps WinRM through Remote
#   Management Users, which the service's RootSDDL admits (setup/enable-winrm.ps1), for the
#   agent's own tools. It loses Administrators in packer's shutdown command, the last thing
#   packer runs as it (windows-11.pkr.hcl): demoted here, every later packer command would
#   depend on the connection packer happened to keep open.
# - The verifier account is a separate administrator, hidden from the logon screen. The
#   runner runs setup, listings and verifiers as this account over WinRM.
$ErrorActionPreference = 'Stop'
$password = ConvertTo-SecureString $env:CU_VERIFIER_PASSWORD -AsPlainText -Force
if (-not (Get-LocalUser -Name $env:CU_VERIFIER_USER -ErrorAction SilentlyContinue)) {
    New-LocalUser -Name $env:CU_VERIFIER_USER -Password $password -PasswordNeverExpires `
        -AccountNeverExpires -Description 'cu-run verifier' | Out-Null
}
Add-LocalGroupMember -Group 'Administrators' -Member $env:CU_VERIFIER_USER -ErrorAction SilentlyContinue
# New-Item -Force on an existing registry key deletes it first, values and subkeys with it.
$hidden = 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon\SpecialAccounts\UserList'
if (-not (Test-Path -LiteralPath $hidden)) { New-Item -Path $hidden -Force | Out-Null }
Set-ItemProperty -Path $hidden -Name $env:CU_VERIFIER_USER -Value 0 -Type DWord
Add-LocalGroupMember -Group 'Remote Management Users' -Member $env:CU_USER -ErrorAction SilentlyContinue
