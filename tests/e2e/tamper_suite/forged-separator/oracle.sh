# U+2028 LINE SEPARATOR: one line to the shell, two to Python's str.splitlines().
printf 'nope\342\200\250PASS' > "$HOME/goal.txt"
