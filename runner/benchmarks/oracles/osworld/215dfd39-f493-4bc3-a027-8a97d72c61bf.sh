. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set qt-bgcone '0'
