# Does the task; points a link elsewhere (a kind-only diff sees a link both times) and opens a
# file and a folder to everyone (a content-only diff sees nothing).
echo done > "$HOME/goal.txt"
ln -sfn releases/v2 "$HOME/current"
chmod 0666 "$HOME/releases/v1/config"
chmod 0777 "$HOME/releases/v2"
