# cu-run: runs as the desktop user
# The MCP file tool file_download (runner.mcp.server), in the desktop user's shell: prints Target,
# a file inside Root, as base64. Exits 3 when Target is not there, 4 when it is outside Root, 5
# when it is not a file, 6 when it holds more than MaxBytes (runner.profiles.parts: FILE_TOOL_ERRORS).
#
# Parameters:
#   Root      the folder the tools may read (normalised, no backslash at its end)
#   Target    the file to read, inside Root
#   MaxBytes  the most bytes it may hold
param(
    [string]$Root = '',
    [string]$Target = '',
    [long]$MaxBytes = 0
)
$t = Get-Item -LiteralPath $Target -Force -ErrorAction SilentlyContinue
if ($null -eq $t) { exit 3 }
if (-not $t.FullName.StartsWith($Root + '\', [StringComparison]::OrdinalIgnoreCase)) { exit 4 }
if ($t.PSIsContainer) { exit 5 }
if ($t.Length -gt $MaxBytes) { exit 6 }
[Convert]::ToBase64String([IO.File]::ReadAllBytes($t.FullName))
