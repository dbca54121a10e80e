rm -f "$USER_HOME/today.txt"
