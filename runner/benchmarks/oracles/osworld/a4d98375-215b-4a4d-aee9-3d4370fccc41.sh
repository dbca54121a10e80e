. "$TASK_DIR/oracle_lib.sh"
gset org.gnome.desktop.screensaver lock-enabled true
