. "$TASK_DIR/oracle_lib.sh"
quit vlc
vlcrc_set qt-slider-colours '20;20;20;30;30;30;40;40;40;10;10;10'
