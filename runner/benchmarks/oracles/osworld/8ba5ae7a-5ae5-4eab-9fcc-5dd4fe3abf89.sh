. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set input-record-path '/home/user/Desktop'
