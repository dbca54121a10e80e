f="$USER_HOME/Documents/report.docx"
[ -f "$f" ] || verdict fail "$f does not exist"
found=$(python3 -I "$TASK_DIR/docx.py" read "$f")
[ -n "$found" ] || { echo "the docx reader printed nothing" >&2; exit 1; }
[ "$found" = heading ] && verdict pass
verdict fail "$f: $found"
