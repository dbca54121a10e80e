[ "$(cat "$USER_HOME/goal.txt")" = done ] && verdict pass
verdict fail "goal.txt does not say done"
