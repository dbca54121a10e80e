"""zip-roundtrip, judged on the host: ~/archive.zip and ~/zipme as the guest's disk held them after
the stop. The archive is the agent's: it is read, never expanded.
    python3 -I verify.py DISK HOME   (exit 0 pass, 1 fail; the last line printed is the reason)"""
import sys
import zipfile
from pathlib import Path

disk, home = Path(sys.argv[1]), sys.argv[2]
path = f"{home}/archive.zip"
archive, folder = disk / path.lstrip("/"), disk / home.lstrip("/") / "zipme"
if not archive.is_file():
    print(f"{path} does not exist")
    sys.exit(1)
try:
    with zipfile.ZipFile(archive) as z:
        names = sorted(z.namelist())
        if names != ["a.txt", "b.txt", "c.txt"]:
            print(f"the archive holds: {' '.join(names)[:200] or 'nothing'}")
            sys.exit(1)
        for name in names:
            if z.read(name) != (folder / name).read_bytes():
                print(f"{name} in the archive differs from zipme/{name}")
                sys.exit(1)
except (zipfile.BadZipFile, OSError, KeyError, EOFError, NotImplementedError, ValueError) as exc:
    print(f"the archive does not expand: {str(exc)[:200]}")
    sys.exit(1)
sys.exit(0)
