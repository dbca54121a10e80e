# Runs as the admin after the agent, its processes stopped. End with `verdict pass` or
# `verdict fail REASON`; print the agent's data with printf '%s', never with echo.
f="$USER_HOME/goal.txt"
[ -f "$f" ] || verdict fail "$f does not exist"
found=$(head -c 200 "$f")
[ "$found" = done ] && verdict pass
verdict fail "goal.txt holds: $(printf '%s' "$found" | tr -cd '[:print:]')"
