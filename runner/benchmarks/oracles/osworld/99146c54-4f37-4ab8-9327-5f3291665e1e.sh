. "$TASK_DIR/oracle_lib.sh"
# "Clear cookies and site data when you close all windows": cookies kept for the session only (4)
chrome_edit Default/Preferences 'd.setdefault("profile", {}).setdefault("default_content_setting_values", {})["cookies"] = 4'
