rm -f "$USER_HOME/goal.txt" "$USER_HOME/json.py"
