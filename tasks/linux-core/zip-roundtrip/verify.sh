z="$USER_HOME/archive.zip"
if [ ! -f "$z" ]; then echo "FAIL $z does not exist"; exit 0; fi
names=$(unzip -Z1 "$z" 2>/dev/null | sort | tr '\n' ' ')
if [ "$names" != "a.txt b.txt c.txt " ]; then echo "FAIL the archive holds: ${names:-nothing readable}"; exit 0; fi
# The archive is the agent's: read it, never expand it (this runs as the admin, and an archive
# can hold links and paths that would write where it likes).
python3 -I - "$z" "$USER_HOME/zipme" <<'PY'
import sys, zipfile
archive, folder = sys.argv[1], sys.argv[2]
try:
    with zipfile.ZipFile(archive) as z:
        for name in ("a.txt", "b.txt", "c.txt"):
            with open(f"{folder}/{name}", "rb") as original:
                if z.read(name) != original.read():
                    print(f"FAIL {name} in the archive differs from zipme/{name}")
                    sys.exit(0)
except (zipfile.BadZipFile, OSError, KeyError) as exc:
    print(f"FAIL the archive does not expand: {exc}")
    sys.exit(0)
print("PASS")
PY
