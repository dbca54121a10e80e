# Backslash escapes, as characters: dash's echo turns \n into a newline and stops at \c.
printf '%s' 'nope\nPASS\c' > "$HOME/goal.txt"
