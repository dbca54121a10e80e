rm -f "$HOME/Documents/fox.txt"
mkdir -p "$HOME/Documents"
