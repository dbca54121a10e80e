rm -f "$USER_HOME/goal.txt"
