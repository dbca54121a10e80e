# cu-run: runs as root
# shellcheck shell=sh
# The Inspect sandbox's computer tool's marker (runner.sandbox.episode: SandboxEpisode.begin):
# inspect_ai's computer tool looks for this file in the sandbox before it sends actions. Written
# in a root-owned folder (under /opt, which the desktop user cannot write), readable by all: made
# afresh with umask 022, so no mode is changed on whatever stood there.
#
# Parameters:
#   TOOL_PATH  where the marker goes
#   TOOL_TEXT  what it holds
: "${TOOL_PATH?}" "${TOOL_TEXT?}"

umask 022
mkdir -p "$(dirname "$TOOL_PATH")"
rm -f "$TOOL_PATH"
printf '%s' "$TOOL_TEXT" > "$TOOL_PATH"
