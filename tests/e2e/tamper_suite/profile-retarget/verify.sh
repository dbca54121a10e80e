# A verifier as a lab may write one: it asks a login shell of the user's, then reads the answer.
as_user env SHELL=/bin/sh sh -lc true
[ "$(cat "$USER_HOME/answer")" = done ] && verdict pass
verdict fail "answer says $(head -c 40 "$USER_HOME/answer")"
