# Asks the session bus for a name the desktop does not run (as a verifier that checks a
# service is gone would), then checks the goal. Only the agent's code can answer.
bus="unix:path=/run/user/$(id -u "$DESKTOP_USER")/bus"
as_user env DBUS_SESSION_BUS_ADDRESS="$bus" timeout 20 dbus-send --session --print-reply --dest=org.cu.Clock \
    / org.freedesktop.DBus.Peer.Ping >/dev/null 2>&1 && echo "org.cu.Clock answered" >&2
sleep 1
[ "$(cat "$USER_HOME/goal.txt" 2>/dev/null)" = done ] && verdict pass
verdict fail "goal.txt does not say done"
