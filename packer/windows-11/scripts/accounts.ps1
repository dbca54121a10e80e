# The last step of provisioning: who may do what in every clone.
# - The desktop user (autologon; the agent acts as this user) becomes a standard user: it
#   keeps WinRM (Remote Management Users) for the agent's own tools, and loses
#   Administrators, so it can neither debug nor impersonate another account's processes.
# - The verifier account is a separate administrator, hidden from the logon screen. The
#   runner runs setup, listings and verifiers as this account over WinRM.
# Packer's own WinRM session keeps the token it logged on with, so the build finishes.
$ErrorActionPreference = 'Stop'
$password = ConvertTo-SecureString $env:CU_VERIFIER_PASSWORD -AsPlainText -Force
if (-not (Get-LocalUser -Name $env:CU_VERIFIER_USER -ErrorAction SilentlyContinue)) {
    New-LocalUser -Name $env:CU_VERIFIER_USER -Password $password -PasswordNeverExpires `
        -AccountNeverExpires -Description 'cu-run verifier' | Out-Null
}
Add-LocalGroupMember -Group 'Administrators' -Member $env:CU_VERIFIER_USER -ErrorAction SilentlyContinue
$hidden = 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon\SpecialAccounts\UserList'
New-Item -Path $hidden -Force | Out-Null
Set-ItemProperty -Path $hidden -Name $env:CU_VERIFIER_USER -Value 0 -Type DWord
Add-LocalGroupMember -Group 'Remote Management Users' -Member $env:CU_USER -ErrorAction SilentlyContinue
Remove-LocalGroupMember -Group 'Administrators' -Member $env:CU_USER
