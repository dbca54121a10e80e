# cu-run: runs as root
# shellcheck shell=sh
# The guest end's start, kept in the warm state (runner.vm.warming runs this before it saves the
# state): the forwarder (runner/network/guest_forwarder.py) loaded and its modules imported, and
# listening on nothing, blocked on a FIFO only root can open, until a networked episode's
# network-start.sh wakes it. Under TCG, python3's start and asyncio's import were most of a
# networked episode's network start (docs/performance.md). An episode without a network never
# wakes it: nothing listens, and its overlay is discarded with the sleeping process.
#
# Parameters:
#   FORWARDER  the forwarder's program, base64
: "${FORWARDER?}"

set -e
d=/run/cu-run-network
# shellcheck disable=SC2174 # /run is there: the one folder made is the deepest, which gets the mode
mkdir -p -m 700 "$d"
printf %s "$FORWARDER" | base64 -d > "$d/forwarder.py"
rm -f "$d/wake" && mkfifo -m 600 "$d/wake"
setsid python3 -I -S "$d/forwarder.py" --wake "$d/wake" </dev/null >"$d/forwarder.log" 2>&1 &
echo $! > "$d/forwarder.pid"
i=0
until grep -q dormant "$d/forwarder.log" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -le 1200 ] || { cat "$d/forwarder.log" >&2; exit 1; }; sleep 0.05
done
