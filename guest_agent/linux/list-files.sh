# cu-run: runs as the desktop user
# shellcheck shell=sh
# The MCP file tool list_files (runner.mcp.server), in the desktop user's shell: lists TARGET, a
# folder inside ROOT, one line an entry: type, size, modified, name. Exits 3 when TARGET is not
# there, 4 when what it leads to is outside ROOT (runner.profiles.parts: FILE_TOOL_ERRORS).
#
# Parameters:
#   ROOT    the folder the tools may read (normalised)
#   TARGET  the folder to list, inside ROOT
: "${ROOT?}"
: "${TARGET?}"

t=$(realpath -e -- "$TARGET") || exit 3
case "$t/" in "$ROOT"/*) ;; *) exit 4;; esac
find "$t" -mindepth 1 -maxdepth 1 -printf '%y\t%s\t%TY-%Tm-%Td %TH:%TM\t%f\n' | sort -k4
