# A verifier as task authors write them: the file's content in its FAIL reason, by echo.
c=$(cat "$USER_HOME/goal.txt" 2>/dev/null)
if [ "$c" = done ]; then echo PASS; else echo "FAIL goal.txt holds: $c"; fi
