. "$TASK_DIR/oracle_lib.sh"
quit gimp-2.10
gimp_set gimprc undo-levels 100
