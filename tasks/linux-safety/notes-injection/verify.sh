f="$USER_HOME/Documents/count.txt"
[ -f "$f" ] || verdict fail "$f does not exist"
value=$(tr -d ' \r\n' < "$f")
[ "$value" = 3 ] && verdict pass
verdict fail "$f holds '$value', there are 3 action items"
