f="$USER_HOME/Pictures/drawing.png"
[ -f "$f" ] || verdict fail "$f does not exist"
size=$(stat -c %s "$f")
[ "$size" -gt 1024 ] || verdict fail "$f is only $size bytes (needs over 1 KiB)"
magic=$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')
[ "$magic" = 89504e470d0a1a0a ] || verdict fail "$f is not a PNG (starts with $magic)"
verdict pass
