f="$USER_HOME/Pictures/red.png"
[ -f "$f" ] || verdict fail "$f does not exist"
found=$(python3 -I "$TASK_DIR/png.py" "$f")
[ -n "$found" ] || { echo "the PNG reader printed nothing" >&2; exit 1; }
case "$found" in
    "256x256 red=99%"|"256x256 red=100%") verdict pass ;;
esac
verdict fail "$f: $found (wanted 256x256, all #ff0000)"
