f="$USER_HOME/Documents/pitch.odp"
[ -f "$f" ] || verdict fail "$f does not exist"
found=$(python3 -I "$TASK_DIR/slides.py" "$f")
[ -n "$found" ] || { echo "the presentation reader printed nothing" >&2; exit 1; }
[ "$found" = "one slide" ] && verdict pass
verdict fail "$f: $found"
