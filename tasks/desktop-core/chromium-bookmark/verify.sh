f="$USER_HOME/.config/google-chrome/Default/Bookmarks"
[ -f "$f" ] || verdict fail "Chrome has no bookmarks file"
found=$(python3 -I - "$f" <<'PY'
import json, sys
try:
    data = json.loads(open(sys.argv[1], encoding="utf-8").read(8 << 20))
except (OSError, ValueError) as exc:
    print(f"the bookmarks file is not JSON: {exc}")
    sys.exit(0)
def urls(node):
    if isinstance(node, dict):
        if node.get("type") == "url":
            yield node.get("url", "")
        for child in node.get("children", []) if isinstance(node.get("children"), list) else []:
            yield from urls(child)
roots = data.get("roots", {}) if isinstance(data, dict) else {}
found = [u for root in roots.values() for u in urls(root)] if isinstance(roots, dict) else []
print("found" if "file:///home/user/Documents/welcome.html" in found else f"{len(found)} bookmarks, none of welcome.html")
PY
)
[ -n "$found" ] || { echo "the bookmarks reader printed nothing" >&2; exit 1; }
[ "$found" = found ] && verdict pass
verdict fail "$found"
