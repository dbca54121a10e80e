. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set qt-max-volume '200'
