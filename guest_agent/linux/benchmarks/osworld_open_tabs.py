# cu-run: runs as root
# OSWorld's chrome_open_tabs step (osw_chrome_open_tabs in osworld-steps.sh, during an imported
# task's setup or its collector's postconfig): opens each URL given as an argument in a new tab
# of the Chrome that listens for DevTools on 127.0.0.1:1337, as upstream does, waiting for each
# page to load (upstream: Playwright's goto), the last one in front. A tab that has not loaded in
# a minute is opened again (three tries); one that never loads is said, and setup goes on.
import json
import sys
import time
import urllib.request

opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # local: never through a proxy


def call(path, method="GET"):
    with opener.open(urllib.request.Request("http://127.0.0.1:1337" + path, method=method), timeout=10) as reply:
        return reply.read()


deadline = time.monotonic() + 180
while True:
    try:
        call("/json/version")
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("Chrome's DevTools did not answer on port 1337 in 180 s")
        time.sleep(0.5)
last = None
for url in sys.argv[1:]:
    for _try in range(3):
        tab = json.loads(call("/json/new?" + url, "PUT"))["id"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            titles = {t["id"]: t.get("title") for t in json.loads(call("/json/list"))}
            if tab not in titles or titles[tab]:
                break
            time.sleep(0.5)
        if titles.get(tab):
            last = tab
            break
        try:
            call("/json/close/" + tab)
        except OSError:
            pass
    else:
        print(f"{url}: no page after 3 tries", file=sys.stderr)
if last is not None:
    call("/json/activate/" + last)
