f="$USER_HOME/Documents/fox.txt"
expected='The quick brown fox jumps over the lazy dog.'
if [ ! -f "$f" ]; then echo "FAIL $f does not exist"; exit 0; fi
# One trailing newline is what editors add; anything else must match exactly, case included.
content=$(cat "$f")
if [ "$content" = "$expected" ]; then echo PASS; else echo "FAIL $f holds: $content"; fi
