. "$TASK_DIR/oracle_lib.sh"
# "this webpage I'm looking at": the setup opened two pages, and the one in front is the
# Illustrated Transformer. Found as a person finds it, by the title the page itself carries
# (Chrome's DevTools list of tabs, on the port the setup opened), so only a page that was really
# served gets bookmarked; then put on the bookmarks bar, in the Bookmarks file Chrome keeps.
url=$(python3 - <<'PY'
import json, sys, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # DevTools is local: no proxy
deadline = time.monotonic() + 120  # the page may still be loading under TCG
while time.monotonic() < deadline:
    try:
        tabs = json.load(opener.open("http://127.0.0.1:1337/json/list", timeout=10))
    except OSError:
        tabs = []
    for tab in tabs:
        if tab.get("type") == "page" and "Illustrated Transformer" in tab.get("title", ""):
            print(tab["url"])
            sys.exit(0)
    time.sleep(1)
sys.exit("no tab titled like the Illustrated Transformer")
PY
) || exit 1
URL="$url" chrome_edit Default/Bookmarks '
def folder(ident, name):
    return {"type": "folder", "id": str(ident), "name": name, "children": [],
            "date_added": "13300000000000000", "date_modified": "0"}
roots = d.setdefault("roots", {})
bar = roots.setdefault("bookmark_bar", folder(1, "Bookmarks bar"))
roots.setdefault("other", folder(2, "Other bookmarks"))
roots.setdefault("synced", folder(3, "Mobile bookmarks"))
bar["children"].append({"type": "url", "id": "10", "name": "The Illustrated Transformer",
                        "url": os.environ["URL"], "date_added": "13300000000000000"})
d.pop("checksum", None)
d["version"] = 1'
