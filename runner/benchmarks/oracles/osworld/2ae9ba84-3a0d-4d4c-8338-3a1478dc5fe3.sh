. "$TASK_DIR/oracle_lib.sh"
chrome_edit Default/Preferences 'd.setdefault("profile", {})["name"] = "Thomas"'
