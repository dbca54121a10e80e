# cu-run: runs as root
# shellcheck shell=sh
# A networked episode's guest end (runner/network/carriers.py), started through the admin channel
# before the agent's turn (runner.profiles.linux: network_start_script): the forwarder (python3:
# the warm state's, woken, or started here);
# the episode's CA in the system store and in the desktop user's NSS databases (Chromium's
# ~/.pki/nssdb, Thunderbird's and Firefox's profiles) where the guest has the tools; the proxy for
# new sessions (/etc/environment) and for Chromium (a managed policy).
#
# Parameters:
#   FORWARDER        the forwarder's program, base64
#   CA_CERT          the episode CA's certificate (PEM), base64: never its key
#   USER_HOME        the desktop user's home
#   DESKTOP_USER     the desktop user's name
#   PROXY            the proxy's URL in the guest (http://127.0.0.1:PORT)
#   CHROMIUM_POLICY  Chromium's managed policy (JSON): the proxy, and its own requests turned off
: "${FORWARDER?}"
: "${CA_CERT?}"
: "${USER_HOME?}"
: "${DESKTOP_USER?}"
: "${PROXY?}"
: "${CHROMIUM_POLICY?}"

set -e
d=/run/cu-run-network
# shellcheck disable=SC2174 # /run is there: the one folder made is the deepest, which gets the mode
mkdir -p -m 700 "$d"
alive() { grep -q '^State:[[:space:]]*[^Z]' "/proc/$1/status" 2>/dev/null; }  # not gone, not a zombie
# The warm state's sleeping forwarder, by its pid and its command line (the pid of one that died
# could be another process's by now).
sleeping() { alive "$1" && tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null | grep -q -- "$d/forwarder.py --wake"; }
forwarder=$(cat "$d/forwarder.pid" 2>/dev/null) || forwarder=
# shellcheck disable=SC2016 # $1 is the inner sh's: the FIFO, opened for writing once the forwarder reads it
if [ -p "$d/wake" ] && [ -n "$forwarder" ] && sleeping "$forwarder" &&
    timeout 10 sh -c 'echo wake > "$1"' sh "$d/wake"; then
    echo "forwarder: woken"  # the warm state's dormant one (network-warm.sh): it listens now
else
    # A state saved without one: started here. -I -S: no site module (the forwarder needs the
    # standard library only), half of its start under TCG. It is waited for last: the stores and
    # settings below are set meanwhile. A sleeping one that did not take the wake in time is
    # stopped first: it could still wake, and two would share the log and the ports.
    if [ -n "$forwarder" ] && sleeping "$forwarder"; then kill -9 "$forwarder" 2>/dev/null || true; fi
    printf %s "$FORWARDER" | base64 -d > "$d/forwarder.py"
    setsid python3 -I -S "$d/forwarder.py" </dev/null >"$d/forwarder.log" 2>&1 &
    forwarder=$!
    echo "forwarder: started"
fi
printf %s "$CA_CERT" | base64 -d > "$d/cu-run-episode-ca.pem"
if [ -d /usr/local/share/ca-certificates ] && command -v update-ca-certificates >/dev/null; then
    cp "$d/cu-run-episode-ca.pem" /usr/local/share/ca-certificates/cu-run-episode-ca.crt
    update-ca-certificates >/dev/null 2>&1 || true
fi
if command -v certutil >/dev/null; then
    install -m 644 "$d/cu-run-episode-ca.pem" /run/cu-run-episode-ca.pem
    # Chromium's store, and each Thunderbird or Firefox profile (*.default*; beside them are
    # folders such as "Crash Reports", whose names hold spaces: read a line at a time).
    { echo "$USER_HOME/.pki/nssdb"; find "$USER_HOME/.thunderbird" "$USER_HOME/.mozilla/firefox" -mindepth 1 -maxdepth 1 \
        -type d -name '*.default*' 2>/dev/null; } | while IFS= read -r db; do
        # shellcheck disable=SC2016 # $1 is the inner sh's: the database's folder, as the user
        runuser -u "$DESKTOP_USER" -- sh -c '
            mkdir -p "$1" && { [ -f "$1/cert9.db" ] || certutil -N --empty-password -d "sql:$1"; } &&
            certutil -A -d "sql:$1" -t C,, -n "cu-run episode CA" -i /run/cu-run-episode-ca.pem' sh "$db"
    done
fi
printf 'http_proxy=%s\nhttps_proxy=%s\nHTTP_PROXY=%s\nHTTPS_PROXY=%s\n' "$PROXY" "$PROXY" "$PROXY" "$PROXY" >> /etc/environment
for p in /etc/chromium/policies/managed /etc/opt/chrome/policies/managed; do
    mkdir -p "$p" && printf %s "$CHROMIUM_POLICY" > "$p/cu-run-proxy.json"
done
i=0
until grep -q listening "$d/forwarder.log" 2>/dev/null; do
    # python3's start under TCG on a busy host takes seconds: a minute before it counts as failed.
    # One that ended (gone, or a zombie this shell has not reaped) is said at once, with what it printed.
    i=$((i + 1))
    { [ "$i" -le 1200 ] && alive "$forwarder"; } ||
        { cat "$d/forwarder.log" >&2; exit 1; }
    sleep 0.05
done
