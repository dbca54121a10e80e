<#
  The last check of provisioning: no folder on the machine's PATH may be written by the desktop
  user. The verifier account runs icacls, schtasks and tar by name after the agent has acted, and
  PowerShell finds a command in PATH's folders in order: one folder the user can write, ahead of
  System32, turns a planted icacls.bat into code run as an administrator. An installer that
  prepends its folder (Python's does) is the usual way such a folder arrives.

  Refused: an Allow entry for the desktop user, Users, Authenticated Users, Everyone or
  Interactive with any right that writes, deletes, or changes the folder's permissions or owner.
#>
$ErrorActionPreference = 'Stop'
$user = New-Object System.Security.Principal.NTAccount($env:CU_USER)
$untrusted = @(
    $user.Translate([System.Security.Principal.SecurityIdentifier]).Value,
    'S-1-5-32-545',  # Users
    'S-1-5-11',      # Authenticated Users
    'S-1-1-0',       # Everyone
    'S-1-5-4'        # Interactive
)
# WriteData, AppendData, Delete, ChangePermissions, TakeOwnership, and the generic write and all
# rights an inherit-only entry may hold.
$writes = 0x2 -bor 0x4 -bor 0x10000 -bor 0x40000 -bor 0x80000 -bor 0x40000000 -bor 0x10000000
$problems = @()
$machinePath = [Environment]::GetEnvironmentVariable('Path', 'Machine')
foreach ($entry in $machinePath.Split(';')) {
    $folder = [Environment]::ExpandEnvironmentVariables($entry.Trim())
    if ($folder -eq '' -or -not (Test-Path -LiteralPath $folder)) { continue }
    $acl = Get-Acl -LiteralPath $folder
    foreach ($rule in $acl.GetAccessRules($true, $true, [System.Security.Principal.SecurityIdentifier])) {
        if ($rule.AccessControlType -ne 'Allow') { continue }
        if ($untrusted -notcontains $rule.IdentityReference.Value) { continue }
        if (([int64]$rule.FileSystemRights -band $writes) -ne 0) {
            $problems += "$folder grants $($rule.IdentityReference.Value) $($rule.FileSystemRights)"
        }
    }
}
if ($problems.Count -gt 0) {
    throw ("a folder on the machine PATH is writable by the desktop user: " + ($problems -join '; '))
}
Write-Output "machine PATH: no folder writable by $env:CU_USER"
