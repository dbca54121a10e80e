"""A page in headless Chromium, driven over the DevTools protocol: load it, give its scripts time,
ask it a JavaScript question, take its picture. For the pages that only show anything once their
scripts have fetched it (Inspect's log viewer), which `chromium --screenshot` takes too early.
Also used by hand for the screenshots in docs/: python tests/headless_page.py URL OUT.png [WAIT]."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _visit(url: str, wait: float, question: str | None, picture: Path | None,
                 size: tuple[int, int]) -> object:
    port = _free_port()
    browser = subprocess.Popen(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                f"--window-size={size[0]},{size[1]}", f"--remote-debugging-port={port}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async with aiohttp.ClientSession() as http:
            page = None
            for _ in range(100):
                try:
                    targets = await (await http.get(f"http://127.0.0.1:{port}/json")).json()
                    page = next(t for t in targets if t["type"] == "page")
                    break
                except (aiohttp.ClientError, StopIteration):
                    await asyncio.sleep(0.2)
            assert page is not None, "headless Chromium did not come up"
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                sent = 0

                async def call(method: str, **params) -> dict:
                    nonlocal sent
                    sent += 1
                    await ws.send_json({"id": sent, "method": method, "params": params})
                    while True:
                        message = json.loads((await ws.receive()).data)
                        if message.get("id") == sent:
                            return message.get("result", message)

                await call("Page.enable")
                await call("Page.navigate", url=url)
                await asyncio.sleep(wait)
                answer = None
                if question is not None:
                    answer = (await call("Runtime.evaluate", expression=question, returnByValue=True))["result"].get("value")
                if picture is not None:
                    shot = await call("Page.captureScreenshot", format="png")
                    picture.write_bytes(base64.b64decode(shot["data"]))
                return answer
    finally:
        browser.terminate()
        browser.wait(timeout=30)


def visit(url: str, *, wait: float = 10.0, question: str | None = None, picture: Path | None = None,
          size: tuple[int, int] = (1400, 1000)) -> object:
    """Loads URL, waits WAIT seconds, returns QUESTION's answer (JavaScript), saves PICTURE."""
    return asyncio.run(_visit(url, wait, question, picture, size))


def images_in_inspect_view(logs: Path, log_name: str, sample: str, tab: str = "transcript", epoch: int = 1) -> int:
    """How many images `inspect view` shows on the TAB (transcript, messages) of SAMPLE's EPOCH in
    LOGS/LOG_NAME: the viewer as a person sees it, not the log's JSON."""
    import time

    import httpx2

    port = _free_port()
    view = subprocess.Popen([str(Path(sys.executable).parent / "inspect"), "view", "start", "--log-dir", str(logs),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("inspect view did not answer within 60 s")
            time.sleep(0.3)
        url = f"http://127.0.0.1:{port}/#/logs/{log_name}/samples/sample/{sample}/{epoch}/{tab}"
        return int(visit(url, wait=12, question="document.querySelectorAll('img').length") or 0)
    finally:
        view.terminate()
        view.wait(timeout=30)


if __name__ == "__main__":
    visit(sys.argv[1], picture=Path(sys.argv[2]), wait=float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)
