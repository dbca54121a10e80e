. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set play-and-exit '0'
