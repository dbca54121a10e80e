# With the verdict helper, as the built-in verifiers now are: a listing in the reason is data.
extra=$(ls -A "$USER_HOME/Desktop")
[ -z "$extra" ] || verdict fail "unexpected files on the Desktop: $extra"
[ "$(cat "$USER_HOME/goal.txt" 2>/dev/null)" = done ] && verdict pass
verdict fail "goal.txt does not say done"
