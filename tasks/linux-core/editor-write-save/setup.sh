rm -f "$USER_HOME/Documents/fox.txt"
mkdir -p "$USER_HOME/Documents"
