# cu-run: runs as the desktop user
# shellcheck shell=sh
# The MCP file tool file_download (runner.mcp.server), in the desktop user's shell: prints
# TARGET, a file inside ROOT, as base64. Exits 3 when TARGET is not there, 4 when what it leads to
# is outside ROOT, 5 when it is not a file, 6 when it holds more than MAX_BYTES
# (runner.profiles.parts: FILE_TOOL_ERRORS).
#
# Parameters:
#   ROOT       the folder the tools may read (normalised)
#   TARGET     the file to read, inside ROOT
#   MAX_BYTES  the most bytes it may hold
: "${ROOT?}"
: "${TARGET?}"
: "${MAX_BYTES?}"

t=$(realpath -e -- "$TARGET") || exit 3
case "$t" in "$ROOT"/*) ;; *) exit 4;; esac
[ -f "$t" ] || exit 5
[ "$(stat -c %s "$t")" -le "$MAX_BYTES" ] || exit 6
base64 -w0 "$t"
