. "$TASK_DIR/oracle_lib.sh"
mv "$HOME/Desktop/todo_list_Jan_1" "$HOME/Desktop/todo_list_Jan_2"
