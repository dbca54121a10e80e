"""editor-write-save, judged on the host: ~/Documents/fox.txt as the guest's disk held it after the stop.
    python3 -I verify.py DISK HOME   (exit 0 pass, 1 fail; the last line printed is the reason)"""
import sys
from pathlib import Path

EXPECTED = "The quick brown fox jumps over the lazy dog."
disk, home = Path(sys.argv[1]), sys.argv[2]
path = f"{home}/Documents/fox.txt"
found = disk / path.lstrip("/")
if not found.is_file():
    print(f"{path} does not exist")
    sys.exit(1)
# Trailing newlines are what editors add; anything else must match exactly, case included.
content = found.read_bytes()[:65536].decode("utf-8", "replace").rstrip("\n")
if content == EXPECTED:
    sys.exit(0)
print(f"{path} holds: {content[:200]}")
sys.exit(1)
