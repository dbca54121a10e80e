rm -f "$USER_HOME/Pictures/drawing.png"
mkdir -p "$USER_HOME/Pictures"
