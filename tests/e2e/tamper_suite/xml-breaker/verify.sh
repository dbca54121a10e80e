# The helper verifier: the file's content in its fail reason, as task authors write them.
c=$(cat "$USER_HOME/goal.txt" 2>/dev/null)
[ "$c" = done ] && verdict pass
verdict fail "goal.txt holds: $c"
