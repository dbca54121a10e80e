# A deliberately weak verifier, for the audit to catch: it checks that the file exists, and
# nothing of what it says.
if [ -f "$USER_HOME/Documents/status.txt" ]; then echo PASS; else echo "FAIL no status.txt"; fi
