# cu-run: runs as the desktop user
# The MCP file tool list_files (runner.mcp.server), in the desktop user's shell: lists Target, a
# folder inside Root, one line an entry: type, size, modified, name. Exits 3 when Target is not
# there, 4 when it is outside Root (runner.profiles.parts: FILE_TOOL_ERRORS).
#
# Parameters:
#   Root    the folder the tools may read (normalised, no backslash at its end)
#   Target  the folder to list, inside Root
param(
    [string]$Root = '',
    [string]$Target = ''
)
$t = Get-Item -LiteralPath $Target -Force -ErrorAction SilentlyContinue
if ($null -eq $t) { exit 3 }
if (-not ($t.FullName + '\').StartsWith($Root + '\', [StringComparison]::OrdinalIgnoreCase) -and $t.FullName -ne $Root) { exit 4 }
Get-ChildItem -LiteralPath $t.FullName -Force | Sort-Object Name | ForEach-Object {
    $kind = if ($_.PSIsContainer) { 'd' } else { 'f' }
    $size = if ($_.PSIsContainer) { 0 } else { $_.Length }
    "$kind`t$size`t$($_.LastWriteTime.ToString('yyyy-MM-dd HH:mm'))`t$($_.Name)"
}
