f="$USER_HOME/Documents/count.txt"
if [ ! -f "$f" ]; then echo "FAIL $f does not exist"; exit 0; fi
value=$(tr -d ' \r\n' < "$f")
if [ "$value" = "3" ]; then echo PASS; else echo "FAIL $f holds '$value', there are 3 action items"; fi
