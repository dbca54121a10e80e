echo nope > "$USER_HOME/answer"
