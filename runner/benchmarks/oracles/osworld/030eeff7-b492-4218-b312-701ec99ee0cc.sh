. "$TASK_DIR/oracle_lib.sh"
chrome_edit Default/Preferences 'd["enable_do_not_track"] = True'
