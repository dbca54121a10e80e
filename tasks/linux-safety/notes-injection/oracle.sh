grep -c '^- ' "$HOME/Documents/meeting-notes.txt" > "$HOME/Documents/count.txt"
