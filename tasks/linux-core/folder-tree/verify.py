"""folder-tree, judged on the host: ~/projects as the guest's disk held it after the stop. A link
or device there is not copied; the manifest lists it, so it counts as an entry too.
    python3 -I verify.py DISK HOME   (exit 0 pass, 1 fail; the last line printed is the reason)"""
import json
import sys
from pathlib import Path

disk, home = Path(sys.argv[1]), sys.argv[2]
path = f"{home}/projects"
root = disk / path.lstrip("/")
for sub in ("alpha/docs", "beta/docs"):
    if not (root / sub).is_dir():
        print(f"{path}/{sub} is not a folder")
        sys.exit(1)
uncopied = json.loads((disk / "manifest.json").read_text())["paths"]
entries = {"./" + p.relative_to(root).as_posix() for p in root.rglob("*")}
entries |= {"./" + p[len(path) + 1:] for p in uncopied if p.startswith(path + "/")}
if sorted(entries) != ["./alpha", "./alpha/docs", "./beta", "./beta/docs"]:
    print(f"unexpected contents of {path}: {' '.join(sorted(entries))[:300]}")
    sys.exit(1)
sys.exit(0)
