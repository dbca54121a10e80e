# What a new login shell of the desktop user sees: run as that user (as_user), with a time limit.
value=$(as_user env SHELL=/bin/bash bash -lc 'printf %s "$GOAL"')
[ "$value" = done ] && verdict pass
verdict fail "a login shell sees GOAL='$value'"
