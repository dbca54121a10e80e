echo 53361 > "$HOME/result.txt"
