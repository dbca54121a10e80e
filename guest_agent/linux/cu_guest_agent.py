#!/usr/bin/python3
"""cu-run's guest agent for the Linux test guest: what is on the desktop, as JSON.

    cu-guest-agent ping               {"agent": "cu-guest-agent", "version": 1}
    cu-guest-agent windows            the top-level windows (title, app, pid, focused, geometry)
    cu-guest-agent tree [--app NAME] [--max-depth N] [--max-nodes N]
                                      the AT-SPI accessibility tree of the visible widgets

The runner reaches it only through its SSH shell (DISPLAY=:0), so it needs no port,
no token and no daemon: nothing in the guest listens for it. It uses only what the
image already has (python3, xprop, xwininfo, pyatspi) and prints one JSON document;
errors go to stderr with exit code 2, which the host turns into a tool error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

VERSION = 1
# The states an agent acts on; the full AT-SPI set (40-odd) would drown them.
INTERESTING_STATES = ("focused", "selected", "checked", "pressed", "expanded", "editable")
# Roles an agent clicks or types into: for these, "disabled" (not sensitive) is worth saying.
ACTIONABLE_ROLES = {"push button", "toggle button", "check box", "radio button", "menu item", "menu",
                    "check menu item", "radio menu item", "combo box", "text", "entry", "spin button",
                    "password text", "link", "slider"}
TEXT_ROLES = {"text", "entry", "password text", "terminal", "paragraph", "label", "document text"}
MAX_TEXT = 200


class AgentError(Exception):
    pass


# ---- windows: EWMH properties read with xprop/xwininfo --------------------------------

_WINDOW_ID = re.compile(r"0x[0-9a-fA-F]+")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_window_ids(xprop_line: str) -> list[str]:
    """'_NET_CLIENT_LIST(WINDOW): window id # 0x60000c, 0x800002' -> ['0x60000c', '0x800002']."""
    if "#" not in xprop_line:
        return []
    return _WINDOW_ID.findall(xprop_line.split("#", 1)[1])


def parse_properties(xprop_output: str) -> dict[str, list[str]]:
    """xprop -id W PROP... output -> {PROP: [values]}; a property that is not set is absent.

    Strings are unquoted and unescaped ('"a \\"b\\""' -> 'a "b"'); other values are split on
    commas ('_NET_WM_STATE_FOCUSED, _NET_WM_STATE_HIDDEN').
    """
    props: dict[str, list[str]] = {}
    for line in xprop_output.splitlines():
        match = re.match(r"^([A-Z_][A-Z0-9_]*)(?:\([A-Z0-9_]+\))?\s*(=|:)\s?(.*)$", line)
        if not match or match.group(2) != "=":
            continue  # "PROP:  not found." and continuation lines
        name, value = match.group(1), match.group(3)
        strings = _QUOTED.findall(value)
        if strings:
            props[name] = [_unescape(s) for s in strings]
        else:
            props[name] = [v.strip() for v in value.split(",") if v.strip()]
    return props


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_geometry(xwininfo_output: str) -> dict[str, int]:
    fields = {"Absolute upper-left X": "x", "Absolute upper-left Y": "y", "Width": "width", "Height": "height"}
    geometry: dict[str, int] = {}
    for line in xwininfo_output.splitlines():
        key, _, value = line.strip().partition(":")
        if key in fields:
            geometry[fields[key]] = int(value.strip())
    if len(geometry) != 4:
        raise AgentError(f"xwininfo gave no geometry: {xwininfo_output[:200]!r}")
    return geometry


def window_record(window_id: str, props: dict[str, list[str]], geometry: dict[str, int], active: str | None) -> dict:
    title = (props.get("_NET_WM_NAME") or props.get("WM_NAME") or [""])[0]
    wm_class = props.get("WM_CLASS") or []
    states = props.get("_NET_WM_STATE") or []
    pid = props.get("_NET_WM_PID")
    return {
        "id": window_id,
        "title": title,
        "app": wm_class[-1] if wm_class else "",
        "pid": int(pid[0]) if pid and pid[0].isdigit() else None,
        "focused": active is not None and int(window_id, 16) == int(active, 16),
        "minimized": "_NET_WM_STATE_HIDDEN" in states,
        "geometry": geometry,
    }


def _x(*args: str) -> str:
    env = dict(os.environ, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=20)
    if done.returncode != 0:
        raise AgentError(f"{args[0]} failed: {done.stderr.strip() or done.returncode}")
    return done.stdout


def list_windows() -> list[dict]:
    root = _x("xprop", "-root", "_NET_CLIENT_LIST", "_NET_ACTIVE_WINDOW").splitlines()
    clients = next((parse_window_ids(l) for l in root if l.startswith("_NET_CLIENT_LIST")), [])
    active_ids = next((parse_window_ids(l) for l in root if l.startswith("_NET_ACTIVE_WINDOW")), [])
    active = active_ids[0] if active_ids else None
    windows = []
    for window_id in clients:
        try:
            props = parse_properties(_x("xprop", "-id", window_id, "_NET_WM_NAME", "WM_NAME", "WM_CLASS",
                                        "_NET_WM_PID", "_NET_WM_STATE"))
            geometry = parse_geometry(_x("xwininfo", "-id", window_id))
        except AgentError:
            continue  # the window closed while we looked
        windows.append(window_record(window_id, props, geometry, active))
    return windows


# ---- accessibility tree: AT-SPI -----------------------------------------------------------

def accessibility_tree(app: str | None, max_depth: int, max_nodes: int) -> dict:
    import pyatspi  # only in the guest; the window list works without it

    pyatspi.setTimeout(3000, 3000)  # a hung application must not hang the agent's tool call
    desktop = pyatspi.Registry.getDesktop(0)
    budget = [max_nodes]
    apps = []
    for application in desktop:
        if application is None or (app and (application.name or "").lower() != app.lower()):
            continue
        node = _node(application, pyatspi, 1, max_depth, budget)
        if node is not None:
            apps.append(node)
    return {"role": "desktop", "name": "", "children": apps, "truncated": budget[0] <= 0}


def _node(acc, pyatspi, depth: int, max_depth: int, budget: list[int]) -> dict | None:
    if budget[0] <= 0:
        return None
    try:
        role = acc.getRoleName()
        states = acc.getState()
        showing = role == "application" or states.contains(pyatspi.STATE_SHOWING)
        if not showing:
            return None  # closed menus and hidden pages: hundreds of nodes an agent cannot act on
        budget[0] -= 1
        node: dict = {"role": role, "name": acc.name or ""}
        bounds = _bounds(acc, pyatspi)
        if bounds:
            node["bounds"] = bounds
        flags = [s for s in INTERESTING_STATES if states.contains(getattr(pyatspi, "STATE_" + s.upper()))]
        if role in ACTIONABLE_ROLES and not states.contains(pyatspi.STATE_SENSITIVE):
            flags.append("disabled")
        if flags:
            node["states"] = flags
        if role in TEXT_ROLES:
            text = _text(acc)
            if text:
                node["text"] = text
        if depth < max_depth:
            children = [c for c in (_node(child, pyatspi, depth + 1, max_depth, budget)
                                    for child in acc if child is not None) if c]
            if children:
                node["children"] = children
        elif acc.childCount:
            node["children_omitted"] = acc.childCount
        return node
    except Exception:  # a widget destroyed while we walk: skip it, keep the rest
        return None


def _bounds(acc, pyatspi) -> list[int] | None:
    try:
        ext = acc.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
    except NotImplementedError:
        return None
    if ext.width <= 0 or ext.height <= 0 or ext.x < -10000 or ext.y < -10000:
        return None
    return [ext.x, ext.y, ext.width, ext.height]


def _text(acc) -> str:
    try:
        text = acc.queryText()
    except NotImplementedError:
        return ""
    return text.getText(0, min(text.characterCount, MAX_TEXT))


# ---- command line ---------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cu-guest-agent")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("ping")
    sub.add_parser("windows")
    tree = sub.add_parser("tree")
    tree.add_argument("--app", default=None)
    tree.add_argument("--max-depth", type=int, default=20)
    tree.add_argument("--max-nodes", type=int, default=500)
    args = parser.parse_args(argv)
    if args.command != "ping" and not os.environ.get("DISPLAY"):
        print("cu-guest-agent: DISPLAY is not set", file=sys.stderr)
        return 2
    try:
        if args.command == "ping":
            result: object = {"agent": "cu-guest-agent", "version": VERSION}
        elif args.command == "windows":
            result = {"windows": list_windows()}
        else:
            result = accessibility_tree(args.app, args.max_depth, args.max_nodes)
    except (AgentError, subprocess.TimeoutExpired) as exc:
        print(f"cu-guest-agent: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
