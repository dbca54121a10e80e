# Runs as the admin before the agent: the state the task starts from.
rm -f "$USER_HOME/goal.txt"
