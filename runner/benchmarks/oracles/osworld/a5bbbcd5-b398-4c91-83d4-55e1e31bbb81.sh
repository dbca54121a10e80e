. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set qt-minimal-view '1'
