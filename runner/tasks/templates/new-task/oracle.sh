# Runs as the desktop user, in place of the agent: solves the task (cu-run validate checks it does).
printf 'done' > "$HOME/goal.txt"
