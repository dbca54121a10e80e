rm -f "$HOME/Pictures/drawing.png"
mkdir -p "$HOME/Pictures"
