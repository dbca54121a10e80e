rm -f "$HOME/today.txt"
