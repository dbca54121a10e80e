z="$HOME/archive.zip"
if [ ! -f "$z" ]; then echo "FAIL $z does not exist"; exit 0; fi
names=$(unzip -Z1 "$z" 2>/dev/null | sort | tr '\n' ' ')
if [ "$names" != "a.txt b.txt c.txt " ]; then echo "FAIL the archive holds: ${names:-nothing readable}"; exit 0; fi
out=$(mktemp -d)
unzip -q "$z" -d "$out" || { echo "FAIL the archive does not expand"; exit 0; }
for f in a.txt b.txt c.txt; do
    if ! cmp -s "$out/$f" "$HOME/zipme/$f"; then echo "FAIL $f in the archive differs from zipme/$f"; exit 0; fi
done
rm -rf "$out"
echo PASS
