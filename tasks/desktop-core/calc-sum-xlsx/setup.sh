d="$USER_HOME/Documents"
rm -f "$d/sales.xlsx" "$d/.~lock.sales.xlsx#"
python3 -I "$TASK_DIR/xlsx.py" write "$d/sales.xlsx"
