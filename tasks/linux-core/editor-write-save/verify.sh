f="$USER_HOME/Documents/fox.txt"
expected='The quick brown fox jumps over the lazy dog.'
[ -f "$f" ] || verdict fail "$f does not exist"
# One trailing newline is what editors add; anything else must match exactly, case included.
content=$(cat "$f")
[ "$content" = "$expected" ] && verdict pass
verdict fail "$f holds: $content"
