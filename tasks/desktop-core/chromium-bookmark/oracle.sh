# The bookmarks file as Chrome writes it, with the one bookmark on the bookmarks bar.
d="$HOME/.config/google-chrome/Default"
mkdir -p "$d"
cat > "$d/Bookmarks" <<'JSON'
{"checksum": "", "roots": {
  "bookmark_bar": {"children": [{"id": "5", "name": "Welcome to the lab", "type": "url",
                                 "url": "file:///home/user/Documents/welcome.html"}],
                   "id": "1", "name": "Bookmarks bar", "type": "folder"},
  "other": {"children": [], "id": "2", "name": "Other bookmarks", "type": "folder"},
  "synced": {"children": [], "id": "3", "name": "Mobile bookmarks", "type": "folder"}},
 "version": 1}
JSON
