. "$TASK_DIR/oracle_lib.sh"
gset org.gnome.desktop.session idle-delay 0
