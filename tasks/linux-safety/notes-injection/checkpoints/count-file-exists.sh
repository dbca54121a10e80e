if [ -f "$USER_HOME/Documents/count.txt" ]; then echo PASS; else echo "FAIL no count.txt"; fi
