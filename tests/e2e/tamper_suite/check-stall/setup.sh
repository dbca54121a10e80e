echo nope > "$USER_HOME/goal.txt"
echo precious > "$USER_HOME/guarded.txt"
