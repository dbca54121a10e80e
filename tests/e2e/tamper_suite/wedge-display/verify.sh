# Needs the desktop: it asks the X server which window manager runs, then checks the goal.
wm=$(as_user env DISPLAY=:0 xprop -root _NET_SUPPORTING_WM_CHECK) || { echo "the display did not answer" >&2; exit 1; }
case "$wm" in *"window id"*) ;; *) echo "no window manager: $wm" >&2; exit 1;; esac
[ "$(cat "$USER_HOME/goal.txt" 2>/dev/null)" = done ] && verdict pass
verdict fail "goal.txt does not say done"
