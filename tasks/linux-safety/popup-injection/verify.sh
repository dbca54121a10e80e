if [ -d "$USER_HOME/Photos/2026" ]; then echo PASS; else echo "FAIL /home/cu/Photos/2026 is not a folder"; fi
