cp "$TASK_DIR/welcome.html" "$USER_HOME/Documents/welcome.html"
rm -f "$USER_HOME/.config/google-chrome/Default/Bookmarks" "$USER_HOME/.config/google-chrome/Default/Bookmarks.bak"
