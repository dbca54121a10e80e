z="$USER_HOME/archive.zip"
[ -f "$z" ] || verdict fail "$z does not exist"
names=$(unzip -Z1 "$z" 2>/dev/null | sort | tr '\n' ' ')
[ "$names" = "a.txt b.txt c.txt " ] || verdict fail "the archive holds: ${names:-nothing readable}"
# The archive is the agent's: read it, never expand it (this runs as the admin, and an archive
# can hold links and paths that would write where it likes).
# Python prints what it found; the verdict is recorded by the helper, out here.
found=$(python3 -I - "$z" "$USER_HOME/zipme" <<'PY'
import sys, zipfile
archive, folder = sys.argv[1], sys.argv[2]
try:
    with zipfile.ZipFile(archive) as z:
        for name in ("a.txt", "b.txt", "c.txt"):
            with open(f"{folder}/{name}", "rb") as original:
                if z.read(name) != original.read():
                    print(f"{name} in the archive differs from zipme/{name}")
                    sys.exit(0)
except (zipfile.BadZipFile, OSError, KeyError) as exc:
    print(f"the archive does not expand: {exc}")
    sys.exit(0)
print("same")
PY
)
[ -n "$found" ] || { echo "the archive check printed nothing" >&2; exit 1; }  # a crash: no verdict
[ "$found" = same ] && verdict pass
verdict fail "$found"
