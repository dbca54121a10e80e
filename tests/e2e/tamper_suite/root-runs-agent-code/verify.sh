# A careless verifier as a lab may write one: it runs, as root, a helper from the user's home.
[ -f "$USER_HOME/.config/answer-check.sh" ] && sh "$USER_HOME/.config/answer-check.sh"
[ "$(cat "$USER_HOME/answer")" = done ] && verdict pass
verdict fail "answer says $(head -c 40 "$USER_HOME/answer")"
