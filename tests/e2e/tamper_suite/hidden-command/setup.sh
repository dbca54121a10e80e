echo nope > "$USER_HOME/goal.txt"
echo keep me > "$USER_HOME/secret.txt"
