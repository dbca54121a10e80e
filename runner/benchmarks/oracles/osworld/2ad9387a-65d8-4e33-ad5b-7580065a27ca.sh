. "$TASK_DIR/oracle_lib.sh"
# a folder "Favorites" on the bookmarks bar, in the Bookmarks file Chrome keeps (no checksum:
# Chrome takes the file as it is and writes its own)
chrome_edit Default/Bookmarks '
def folder(ident, name, children=()):
    return {"type": "folder", "id": str(ident), "name": name, "children": list(children),
            "date_added": "13300000000000000", "date_modified": "0"}
roots = d.setdefault("roots", {})
roots.setdefault("bookmark_bar", folder(1, "Bookmarks bar"))["children"].append(folder(4, "Favorites"))
roots.setdefault("other", folder(2, "Other bookmarks"))
roots.setdefault("synced", folder(3, "Mobile bookmarks"))
d.pop("checksum", None)
d["version"] = 1'
