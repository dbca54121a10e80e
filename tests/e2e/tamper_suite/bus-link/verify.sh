[ "$(cat "$USER_HOME/goal.txt" 2>/dev/null)" = done ] && verdict pass
verdict fail "goal.txt does not say done"
