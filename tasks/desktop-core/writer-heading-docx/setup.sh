d="$USER_HOME/Documents"
rm -f "$d/report.docx" "$d/.~lock.report.docx#"
python3 -I "$TASK_DIR/docx.py" write "$d/report.docx"
