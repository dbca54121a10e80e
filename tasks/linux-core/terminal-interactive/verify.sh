f="$USER_HOME/today.txt"
if [ ! -f "$f" ]; then echo "FAIL $f does not exist"; exit 0; fi
value=$(tr -d ' \r\n' < "$f")
today=$(date +%F)
if [ "$value" = "$today" ]; then echo PASS; else echo "FAIL $f holds '$value', today is $today"; fi
