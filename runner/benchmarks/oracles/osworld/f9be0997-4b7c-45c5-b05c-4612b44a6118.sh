. "$TASK_DIR/oracle_lib.sh"
gset org.gnome.desktop.notifications show-banners false
