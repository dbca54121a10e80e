. "$TASK_DIR/oracle_lib.sh"
quit gimp-2.10
gimp_set sessionrc hide-docks yes
