f="$USER_HOME/result.txt"
if [ ! -f "$f" ]; then echo "FAIL $f does not exist"; exit 0; fi
value=$(tr -d ' \r\n' < "$f")
if [ "$value" = 53361 ]; then echo PASS; else echo "FAIL $f holds '$value', not 53361"; fi
