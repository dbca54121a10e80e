#!/usr/bin/python3
"""cu-run's guest agent for the Linux test guest: what is on the desktop, as JSON.

    cu-guest-agent ping               {"agent": "cu-guest-agent", "version": 1}
    cu-guest-agent windows            the top-level windows (title, app, pid, focused, geometry)
    cu-guest-agent tree [--app NAME] [--max-depth N] [--max-nodes N]
                                      the AT-SPI accessibility tree of the visible widgets

The runner reaches it only through its SSH shell (DISPLAY=:0), so it needs no port,
no token and no daemon: nothing in the guest listens for it. It uses only what the
image already has (python3, libX11, pyatspi) and prints one JSON document;
errors go to stderr with exit code 2, which the host turns into a tool error.
"""

from __future__ import annotations

import ctypes
import json
import os
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


# ---- windows: EWMH properties read from the X server through libX11 ---------------------
#
# Under TCG every program the guest starts costs a fraction of a second, so the window list
# is read in this one process (ctypes and libX11, which every X client of the image already
# loads) rather than by an xprop and an xwininfo per window.

_X11 = "libX11.so.6"
_ANY_PROPERTY_TYPE = 0
_SUCCESS = 0
_MAX_PROPERTY_LONGS = 1 << 16  # 256 KiB: far more than a title, a class or a client list


class _XDisplay:
    """One connection to the X server of $DISPLAY."""

    def __init__(self) -> None:
        try:
            lib = ctypes.CDLL(_X11)
        except OSError as exc:
            raise AgentError(f"cannot load {_X11}: {exc}") from None
        lib.XOpenDisplay.restype = ctypes.c_void_p
        lib.XOpenDisplay.argtypes = [ctypes.c_char_p]
        lib.XCloseDisplay.argtypes = [ctypes.c_void_p]
        lib.XDefaultRootWindow.restype = ctypes.c_ulong
        lib.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        lib.XInternAtom.restype = ctypes.c_ulong
        lib.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        lib.XGetAtomName.restype = ctypes.c_void_p  # freed with XFree, so not c_char_p
        lib.XGetAtomName.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
        lib.XGetWindowProperty.argtypes = [
            ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long, ctypes.c_long, ctypes.c_int,
            ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_void_p)]
        lib.XGetGeometry.argtypes = [
            ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_uint)]
        lib.XTranslateCoordinates.argtypes = [
            ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int, ctypes.c_int,
            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_ulong)]
        lib.XFree.argtypes = [ctypes.c_void_p]
        # Xlib's default error handler exits the process: a window that closes while it is
        # read would end the whole listing. Errors become the failed call's return value.
        handler_type = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
        self._ignore_errors = handler_type(lambda _display, _event: 0)  # kept alive with the connection
        lib.XSetErrorHandler.argtypes = [handler_type]
        lib.XSetErrorHandler(self._ignore_errors)
        self._lib = lib
        self._dpy = lib.XOpenDisplay(None)
        if not self._dpy:
            raise AgentError(f"cannot open the X display {os.environ.get('DISPLAY')!r}")
        self.root = lib.XDefaultRootWindow(self._dpy)
        self._atoms: dict[str, int] = {}
        self._names: dict[int, str] = {}  # every property read asks its type's name

    def close(self) -> None:
        self._lib.XCloseDisplay(self._dpy)

    def atom(self, name: str) -> int:
        if name not in self._atoms:
            # only_if_exists: a read-only look adds no atom to the server; 0 when there is none
            self._atoms[name] = self._lib.XInternAtom(self._dpy, name.encode(), 1)
        return self._atoms[name]

    def atom_name(self, atom: int) -> str:
        if atom not in self._names:
            pointer = self._lib.XGetAtomName(self._dpy, atom)
            if not pointer:
                return ""
            try:
                self._names[atom] = ctypes.string_at(pointer).decode("utf-8", "replace")
            finally:
                self._lib.XFree(pointer)
        return self._names[atom]

    def property(self, window: int, name: str) -> tuple[str, int, bytes | list[int]] | None:
        """WINDOW's property NAME: its type's name, its format and its value (bytes for format
        8, numbers for 16 and 32); None when it is not set or the window is gone."""
        atom = self.atom(name)
        if not atom:
            return None  # no client ever named it, so no window has it
        kind, fmt = ctypes.c_ulong(), ctypes.c_int()
        count, after, data = ctypes.c_ulong(), ctypes.c_ulong(), ctypes.c_void_p()
        status = self._lib.XGetWindowProperty(self._dpy, window, atom, 0, _MAX_PROPERTY_LONGS, 0,
                                              _ANY_PROPERTY_TYPE, ctypes.byref(kind), ctypes.byref(fmt),
                                              ctypes.byref(count), ctypes.byref(after), ctypes.byref(data))
        if status != _SUCCESS or not kind.value:
            return None
        try:
            if not data or not count.value:
                value: bytes | list[int] = b"" if fmt.value == 8 else []
            elif fmt.value == 8:
                value = ctypes.string_at(data, count.value)
            else:  # Xlib hands format 32 as C longs and 16 as C shorts, whatever their wire size
                item, mask = (ctypes.c_long, 0xFFFFFFFF) if fmt.value == 32 else (ctypes.c_short, 0xFFFF)
                value = [int(v) & mask for v in ctypes.cast(data, ctypes.POINTER(item))[:count.value]]
        finally:
            if data:
                self._lib.XFree(data)
        return self.atom_name(kind.value), fmt.value, value

    def geometry(self, window: int) -> dict[str, int] | None:
        """WINDOW's outer corner on the screen and its size, as xwininfo reports them."""
        root, x, y = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_int()
        width, height, border, depth = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        if not self._lib.XGetGeometry(self._dpy, window, ctypes.byref(root), ctypes.byref(x), ctypes.byref(y),
                                      ctypes.byref(width), ctypes.byref(height), ctypes.byref(border),
                                      ctypes.byref(depth)):
            return None
        child = ctypes.c_ulong()
        if not self._lib.XTranslateCoordinates(self._dpy, window, root.value, -border.value, -border.value,
                                               ctypes.byref(x), ctypes.byref(y), ctypes.byref(child)):
            return None
        return {"x": x.value, "y": y.value, "width": width.value, "height": height.value}


def property_strings(kind: str, fmt: int, value: bytes | list[int], atom_name) -> list[str]:
    """A property's value as strings, as xprop shows it: text split at its NULs (WM_CLASS holds
    two), atoms by name (ATOM_NAME looks one up), other numbers in decimal."""
    if fmt == 8:
        encoding = "utf-8" if kind == "UTF8_STRING" else "latin-1"  # STRING is ISO 8859-1 by ICCCM
        parts = bytes(value).split(b"\0")
        if parts and parts[-1] == b"":
            parts.pop()
        return [part.decode(encoding, "replace") for part in parts]
    if kind == "ATOM":
        return [atom_name(v) for v in value]
    return [str(v) for v in value]


WINDOW_PROPERTIES = ("_NET_WM_NAME", "WM_NAME", "WM_CLASS", "_NET_WM_PID", "_NET_WM_STATE")


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


def list_windows() -> list[dict]:
    x = _XDisplay()
    try:
        def windows_in(name: str) -> list[int]:  # a root property that lists windows (0: none)
            found = x.property(x.root, name)
            return [w for w in found[2] if w] if found and found[1] == 32 else []

        active = next((hex(w) for w in windows_in("_NET_ACTIVE_WINDOW")), None)
        windows = []
        for window in windows_in("_NET_CLIENT_LIST"):
            geometry = x.geometry(window)
            if geometry is None:
                continue  # the window closed while we looked
            props = {name: property_strings(*found, x.atom_name) for name in WINDOW_PROPERTIES
                     if (found := x.property(window, name)) is not None}
            windows.append(window_record(hex(window), props, geometry, active))
        return windows
    finally:
        x.close()


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

USAGE = "usage: cu-guest-agent ping | windows | tree [--app NAME] [--max-depth N] [--max-nodes N]"
TREE_OPTIONS = {"--app": ("app", str), "--max-depth": ("max_depth", int), "--max-nodes": ("max_nodes", int)}


def parse_args(argv: list[str]) -> tuple[str, dict]:
    """The command and its options. Read by hand: importing argparse costs ~0.15 s under TCG,
    on every tool call."""
    if not argv or argv[0] not in ("ping", "windows", "tree"):
        raise AgentError(USAGE)
    command, rest = argv[0], argv[1:]
    options: dict = {"app": None, "max_depth": 20, "max_nodes": 500} if command == "tree" else {}
    while rest:
        flag = rest.pop(0)
        if command != "tree" or flag not in TREE_OPTIONS or not rest:
            raise AgentError(USAGE)
        name, kind = TREE_OPTIONS[flag]
        try:
            options[name] = kind(rest.pop(0))
        except ValueError:
            raise AgentError(f"{flag} takes a number; {USAGE}") from None
    return command, options


def main(argv: list[str] | None = None) -> int:
    try:
        command, options = parse_args(sys.argv[1:] if argv is None else argv)
    except AgentError as exc:
        print(f"cu-guest-agent: {exc}", file=sys.stderr)
        return 2
    if command != "ping" and not os.environ.get("DISPLAY"):
        print("cu-guest-agent: DISPLAY is not set", file=sys.stderr)
        return 2
    try:
        if command == "ping":
            result: object = {"agent": "cu-guest-agent", "version": VERSION}
        elif command == "windows":
            result = {"windows": list_windows()}
        else:
            result = accessibility_tree(**options)
    except AgentError as exc:
        print(f"cu-guest-agent: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
