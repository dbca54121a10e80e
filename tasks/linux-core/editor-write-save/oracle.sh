mkdir -p "$HOME/Documents"
printf '%s\n' 'The quick brown fox jumps over the lazy dog.' > "$HOME/Documents/fox.txt"
