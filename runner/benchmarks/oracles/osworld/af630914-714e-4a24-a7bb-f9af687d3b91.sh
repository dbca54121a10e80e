. "$TASK_DIR/oracle_lib.sh"
# the settings page's "Very large" font size
chrome_edit Default/Preferences 'd.setdefault("webkit", {}).setdefault("webprefs", {})["default_font_size"] = 24'
