rm -rf "$USER_HOME/goal.txt" "$USER_HOME/a-scratch"
mkdir -p "$USER_HOME/a-scratch" "$USER_HOME/zz-notes"
echo 'ship on friday' > "$USER_HOME/zz-notes/todo.txt"
