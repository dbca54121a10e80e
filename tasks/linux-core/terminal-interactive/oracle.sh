date +%F > "$HOME/today.txt"
