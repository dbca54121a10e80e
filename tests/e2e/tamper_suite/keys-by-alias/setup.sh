echo nope > "$USER_HOME/goal.txt"
