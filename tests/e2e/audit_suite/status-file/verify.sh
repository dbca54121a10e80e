# The same task with a verifier that reads what the file says: the word, and nothing else.
if [ "$(cat "$USER_HOME/Documents/status.txt" 2>/dev/null)" = ready ]; then echo PASS
else echo "FAIL status.txt does not say ready"; fi
