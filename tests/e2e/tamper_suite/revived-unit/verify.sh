# Needs the desktop alive (so the user's service manager is kept); gives what is left of the
# agent time to act, then checks the goal.
as_user env DISPLAY=:0 xprop -root _NET_SUPPORTING_WM_CHECK >/dev/null || { echo "the display did not answer" >&2; exit 1; }
sleep 4
[ "$(cat "$USER_HOME/goal.txt" 2>/dev/null)" = done ] && verdict pass
verdict fail "goal.txt does not say done"
