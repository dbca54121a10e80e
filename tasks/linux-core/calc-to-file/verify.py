"""calc-to-file, judged on the host: ~/result.txt as the guest's disk held it after the stop.
    python3 -I verify.py DISK HOME   (exit 0 pass, 1 fail; the last line printed is the reason)"""
import sys
from pathlib import Path

disk, home = Path(sys.argv[1]), sys.argv[2]
path = f"{home}/result.txt"
found = disk / path.lstrip("/")
if not found.is_file():
    print(f"{path} does not exist")
    sys.exit(1)
value = "".join(c for c in found.read_bytes()[:4096].decode("utf-8", "replace") if c not in " \r\n")
if value == "53361":
    sys.exit(0)
print(f"{path} holds '{value[:200]}', not 53361")
sys.exit(1)
