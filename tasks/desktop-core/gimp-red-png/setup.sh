rm -f "$USER_HOME/Pictures/red.png"
