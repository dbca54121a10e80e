f="$USER_HOME/result.txt"
[ -f "$f" ] || verdict fail "$f does not exist"
value=$(tr -d ' \r\n' < "$f")
[ "$value" = 53361 ] && verdict pass
# The verdict helper records the reason as data: what the agent wrote cannot become a verdict.
verdict fail "$f holds '$value', not 53361"
