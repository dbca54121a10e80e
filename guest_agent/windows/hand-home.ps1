# cu-run: runs as the verifier account
<#
  After setup (runner.profiles.windows: hand_home_script): what setup made in the desktop
  user's home becomes the user's. As on Linux (root-owned files only), only items owned by the
  admin running this, or by Administrators (an elevated admin's default owner), are re-owned.
  Owners are read in this one process, and icacls runs once per item found, a handful: one
  process per item of a profile (thousands after the first logon) ran past the step's limit.

  The runner sends this file over WinRM, its parameters filled in. The image holds a copy under
  C:\cu-run\guest-agent (read-only to the desktop user; older images let it write): that copy is never run.

  Reparse points (the profile's legacy junctions, or a link) are neither followed nor re-owned.
  The items of a folder named in Pruned are looked at but not entered (see hand_home_script for
  why what setup made deeper keeps its owner and stays the user's to use).
#>
param(
    [string]$HomeFolder = '',
    [string]$UserName = '',
    [string[]]$Pruned = @()
)
$admins = @((New-Object System.Security.Principal.SecurityIdentifier('S-1-5-32-544')),
            [System.Security.Principal.WindowsIdentity]::GetCurrent().User)
$prune = New-Object 'System.Collections.Generic.HashSet[string]'  # ordinal comparison
foreach ($folder in $Pruned) { [void]$prune.Add($folder) }
$pending = New-Object 'System.Collections.Generic.Queue[System.IO.DirectoryInfo]'
$top = Get-Item -LiteralPath $HomeFolder -Force -ErrorAction SilentlyContinue
if ($top -is [IO.DirectoryInfo]) { $pending.Enqueue($top) }
$foreign = New-Object 'System.Collections.Generic.List[string]'
while ($pending.Count -gt 0) {
    $folder = $pending.Dequeue()
    $inside = $prune.Contains($folder.FullName)
    try { $items = $folder.GetFileSystemInfos() } catch { continue }
    foreach ($item in $items) {
        if ($item.Attributes -band [IO.FileAttributes]::ReparsePoint) { continue }
        try { $owner = $item.GetAccessControl('Owner').GetOwner([System.Security.Principal.SecurityIdentifier]) }
        catch { continue }
        if ($admins -contains $owner) { $foreign.Add($item.FullName) }
        if (-not $inside -and $item -is [IO.DirectoryInfo]) { $pending.Enqueue($item) }
    }
}
foreach ($path in $foreign) {
    icacls $path /setowner $UserName /q | Out-Null
    if ($LASTEXITCODE -ne 0) { throw "icacls could not give $path to its user" }
}
