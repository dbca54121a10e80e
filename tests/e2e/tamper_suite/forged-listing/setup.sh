rm -f "$USER_HOME/goal.txt"; rm -rf "$USER_HOME/Desktop"; mkdir -p "$USER_HOME/Desktop"
