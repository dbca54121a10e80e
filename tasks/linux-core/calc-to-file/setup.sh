rm -f "$USER_HOME/result.txt"
