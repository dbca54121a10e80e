rm -f "$HOME/result.txt"
