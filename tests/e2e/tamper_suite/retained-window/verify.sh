# Reads live desktop state: is a window titled "Report - done" on the screen?
found=$(as_user env DISPLAY=:0 xdotool search --name '^Report - done$' 2>/dev/null)
[ -n "$found" ] && verdict pass
verdict fail "no window reads Report - done"
