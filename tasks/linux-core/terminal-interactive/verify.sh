f="$USER_HOME/today.txt"
[ -f "$f" ] || verdict fail "$f does not exist"
value=$(tr -d ' \r\n' < "$f")
today=$(date +%F)
[ "$value" = "$today" ] && verdict pass
verdict fail "$f holds '$value', today is $today"
