. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set one-instance-when-started-from-file '0'
