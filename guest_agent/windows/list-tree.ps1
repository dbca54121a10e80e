# cu-run: runs as the verifier account
<#
  The write-set listing (runner.profiles.windows: list_script, parse_listing). One line per item
  under the roots, tab-separated: kind (d or f), size, last write time in ticks, SHA-256 (empty
  when not hashed), path. Windows names hold no tab or newline, so a line is an item. Past
  MaxEntries items, a line "truncated" and nothing more.

  The runner sends this file over WinRM for each listing, its parameters filled in. The image
  holds a copy under C:\cu-run\guest-agent (read-only to the desktop user; older images let it write): that copy is never run.

  Reparse points (junctions, links) are listed, never entered nor hashed. The items of a folder
  named in Pruned are listed unhashed and not entered: the ignore patterns cover all of them
  (runner.profiles.listing.pruned_folders), and the host applies those patterns whatever this
  lists. A profile's AppData holds tens of thousands of items after the first logon. A folder
  is pruned when its path is one in Pruned exactly, case included: a lister that prunes less is
  still right, one that pruned more would hide changes.
#>
param(
    [string[]]$Roots = @(),
    [string[]]$Pruned = @(),
    [long]$MaxEntries = 0,
    [long]$HashMaxBytes = 0,
    [double]$HashBudgetSeconds = 0
)
$ErrorActionPreference = 'SilentlyContinue'
$clock = [Diagnostics.Stopwatch]::StartNew()
$prune = New-Object 'System.Collections.Generic.HashSet[string]'  # ordinal comparison
foreach ($folder in $Pruned) { [void]$prune.Add($folder) }
$seen = New-Object 'System.Collections.Generic.HashSet[string]'  # roots may overlap
$pending = New-Object 'System.Collections.Generic.Stack[System.IO.DirectoryInfo]'
$sha256 = [Security.Cryptography.SHA256]::Create()

function Out-Entry([IO.FileSystemInfo]$Item, [bool]$Hash) {
    $ticks = $Item.LastWriteTimeUtc.Ticks
    if ($Item -is [IO.DirectoryInfo]) { return "d`t0`t$ticks`t`t$($Item.FullName)" }
    $digest = ''
    if ($Hash -and $Item.Length -le $HashMaxBytes -and $clock.Elapsed.TotalSeconds -lt $HashBudgetSeconds) {
        try {
            $stream = [IO.File]::OpenRead($Item.FullName)
            try { $digest = [BitConverter]::ToString($sha256.ComputeHash($stream)).Replace('-', '') }
            finally { $stream.Dispose() }
        } catch { $digest = '' }
    }
    "f`t$($Item.Length)`t$ticks`t$digest`t$($Item.FullName)"
}

foreach ($root in $Roots) {
    $top = Get-Item -LiteralPath $root -Force
    if ($null -eq $top) { continue }
    if (-not $top.PSIsContainer) {
        if (-not $seen.Add($top.FullName)) { continue }
        if ($seen.Count -gt $MaxEntries) { 'truncated'; return }
        Out-Entry $top (($top.Attributes -band [IO.FileAttributes]::ReparsePoint) -eq 0)
        continue
    }
    $pending.Push($top)
    while ($pending.Count -gt 0) {
        $folder = $pending.Pop()
        $ignored = $prune.Contains($folder.FullName)
        try { $items = $folder.GetFileSystemInfos() } catch { continue }
        foreach ($item in $items) {
            if (-not $seen.Add($item.FullName)) { continue }
            if ($seen.Count -gt $MaxEntries) { 'truncated'; return }
            $enter = -not $ignored -and ($item.Attributes -band [IO.FileAttributes]::ReparsePoint) -eq 0
            Out-Entry $item $enter
            if ($enter -and $item -is [IO.DirectoryInfo]) { $pending.Push($item) }
        }
    }
}
