f="$USER_HOME/Pictures/drawing.png"
if [ ! -f "$f" ]; then echo "FAIL $f does not exist"; exit 0; fi
size=$(stat -c %s "$f")
if [ "$size" -le 1024 ]; then echo "FAIL $f is only $size bytes (needs over 1 KiB)"; exit 0; fi
magic=$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')
if [ "$magic" != 89504e470d0a1a0a ]; then echo "FAIL $f is not a PNG (starts with $magic)"; exit 0; fi
echo PASS
