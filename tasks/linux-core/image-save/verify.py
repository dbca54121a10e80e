"""image-save, judged on the host: ~/Pictures/drawing.png as the guest's disk held it after the stop.
    python3 -I verify.py DISK HOME   (exit 0 pass, 1 fail; the last line printed is the reason)"""
import sys
from pathlib import Path

disk, home = Path(sys.argv[1]), sys.argv[2]
path = f"{home}/Pictures/drawing.png"
found = disk / path.lstrip("/")
if not found.is_file():
    print(f"{path} does not exist")
    sys.exit(1)
size = found.stat().st_size
if size <= 1024:
    print(f"{path} is only {size} bytes (needs over 1 KiB)")
    sys.exit(1)
with found.open("rb") as image:
    magic = image.read(8)
if magic != b"\x89PNG\r\n\x1a\n":
    print(f"{path} is not a PNG (starts with {magic.hex()})")
    sys.exit(1)
sys.exit(0)
