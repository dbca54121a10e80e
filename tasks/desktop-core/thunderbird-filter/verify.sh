d="$USER_HOME/.thunderbird/cu.default/Mail/Local Folders"
[ -f "$d/Invoices" ] || verdict fail "Local Folders has no folder Invoices"
rules="$d/msgFilterRules.dat"
[ -f "$rules" ] || verdict fail "Local Folders has no message filters"
# The file is the agent's: read as data, a filter at a time, by Python (no shell expansion of it).
found=$(python3 -I - "$rules" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read(1 << 20)
filters, current = [], None
for line in text.split("\n"):
    key, _, value = line.partition("=")
    value = value.strip().strip('"')
    if key == "name":
        current = {"name": value}
        filters.append(current)
    elif current is not None:
        current.setdefault(key, value)
for f in filters:
    if f["name"] == "Invoices":
        if f.get("enabled", "yes") != "yes":
            print("the filter Invoices is turned off")
        elif f.get("action") != "Move to folder" or not f.get("actionValue", "").endswith("/Invoices"):
            print(f"the filter Invoices does not move to Invoices ({f.get('action')} {f.get('actionValue')})")
        elif "(subject,contains,invoice)" not in f.get("condition", "").lower():
            print(f"the filter Invoices matches {f.get('condition')!r}, not a subject containing invoice")
        else:
            print("found")
        break
else:
    print("no filter is named Invoices")
PY
)
[ -n "$found" ] || { echo "the filter reader printed nothing" >&2; exit 1; }
[ "$found" = found ] && verdict pass
verdict fail "$found"
