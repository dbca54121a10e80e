# The honest verifier: the goal file says done, or the task was not done.
if [ "$(cat "$USER_HOME/goal.txt" 2>/dev/null)" = done ]; then echo PASS; else echo "FAIL goal.txt does not say done"; fi
