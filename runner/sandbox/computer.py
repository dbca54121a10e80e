"""Inspect's computer() tool, served from the VM's VNC display instead of a program in the guest.

Inspect's tool runs `python3 /opt/inspect/tool/computer_tool.py ACTION --ARG ...` in the sandbox
and reads one JSON object back ({"output", "error", "base64_image"}). The provider answers that
command here, on the host, with the display cu-run's own MCP tools use: nothing the agent can
reach in the guest takes part, and the screenshot is the framebuffer QEMU shows (docs/inspect.md
has the measurement against an in-guest xdotool).

COMPUTER_TOOL is written into the guest at sample start (Inspect finds the tool's sandbox by that
file); run inside the guest by anything else, it only says where its actions are served.
"""

from __future__ import annotations

import argparse
import base64
import time
from typing import Any

from typing_extensions import override

from runner.display.base import Button, Display
from runner.display.keys import MODIFIERS

COMPUTER_TOOL = "/opt/inspect/tool/computer_tool.py"
# What the file in the guest holds: the actions are the host's, never the guest's.
COMPUTER_TOOL_STUB = ('import json\nprint(json.dumps({"error": "cu-run serves the computer tool from the VM\'s '
                      'display; run it through the sandbox\'s exec"}))\n')
# After an input action the screen is shown once it has had a moment to change, as the
# reference tool does.
SETTLE_S = 0.5
CLICKS: dict[str, tuple[Button, int]] = {"left_click": ("left", 1), "right_click": ("right", 1), "middle_click": ("middle", 1),
          "double_click": ("left", 2), "triple_click": ("left", 3)}
# xdotool's key names (what Inspect's tool sends) that differ from cu-run's (runner.display.keys).
_XDOTOOL_KEYS = {"prior": "pageup", "next": "pagedown", "print": "printscreen", "kp_enter": "enter",
                 "caps_lock": "capslock", "control_l": "ctrl", "control_r": "ctrl", "shift_l": "shift",
                 "shift_r": "shift", "alt_l": "alt", "alt_r": "alt", "super_l": "super", "super_r": "super",
                 "meta_l": "meta", "meta_r": "meta", "comma": ",", "minus": "-", "plus": "+", "period": ".",
                 "slash": "/", "equal": "=", "semicolon": ";", "apostrophe": "'", "grave": "`",
                 "bracketleft": "[", "bracketright": "]", "backslash": "\\"}


def is_computer_tool(argv: list[str]) -> bool:
    """Whether ARGV is Inspect's computer tool command."""
    return len(argv) >= 2 and argv[0].rsplit("/", 1)[-1].startswith("python") and argv[1] == COMPUTER_TOOL


def serve(display: Display, argv: list[str]) -> dict[str, Any]:
    """The computer tool's answer to ARGV (its command line, after the script's path)."""
    try:
        args = _parser().parse_args(argv)
        return _act(display, args)
    except (ValueError, _BadArguments) as exc:
        return {"error": str(exc)}


class _BadArguments(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    @override
    def error(self, message: str):  # raise instead of exiting the runner
        raise _BadArguments(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="computer_tool.py", add_help=False)
    parser.add_argument("action")
    parser.add_argument("--coordinate", nargs=2, type=int)
    parser.add_argument("--start_coordinate", nargs=2, type=int)
    parser.add_argument("--text")
    parser.add_argument("--duration", type=int)
    parser.add_argument("--scroll_amount", type=int)
    parser.add_argument("--scroll_direction", choices=("up", "down", "left", "right"))
    parser.add_argument("--region", nargs=4, type=int)
    return parser


def _act(display: Display, args: argparse.Namespace) -> dict[str, Any]:
    action = args.action
    if action == "screenshot":
        return _screen(display)
    if action == "cursor_position":
        x, y = display.pointer
        return {"output": f"X={x},Y={y}"}
    if action == "wait":
        time.sleep(max(0, args.duration or 1))
        return _screen(display)
    if action == "mouse_move":
        display.move(*_point(args.coordinate, action))
    elif action in CLICKS:
        button, times = CLICKS[action]
        x, y = args.coordinate or display.pointer
        if times == 3:  # a double click, then a third within the guest's double-click time
            display.click(x, y, button, double=True)
            display.click(x, y, button)
        else:
            display.click(x, y, button, double=times == 2)
    elif action == "left_click_drag":
        display.drag(*_point(args.start_coordinate, action), *_point(args.coordinate, action))
    elif action == "scroll":
        x, y = args.coordinate or display.pointer
        display.scroll(x, y, args.scroll_direction or "down", args.scroll_amount or 3)
    elif action == "key":
        for combo in (args.text or "").split():
            key, mods = xdotool_combo(combo)
            display.key(key, mods)
    elif action == "type":
        display.type(args.text or "")
    else:
        return {"error": f"{action} is not served by cu-run's display (served: screenshot, cursor_position, "
                         "mouse_move, the clicks, left_click_drag, scroll, key, type, wait)"}
    time.sleep(SETTLE_S)
    return _screen(display)


def xdotool_combo(combo: str) -> tuple[str, tuple[str, ...]]:
    """An xdotool key combination ('ctrl+Return', 'Prior') as cu-run's key and modifiers."""
    parts = [p for p in combo.split("+") if p] or ["+"]
    names = [_XDOTOOL_KEYS.get(p.lower(), p) for p in parts]
    *mods, key = names
    for mod in mods:
        if mod.lower() not in MODIFIERS:
            raise ValueError(f"{mod!r} in {combo!r} is not a modifier ({', '.join(MODIFIERS)})")
    return key, tuple(m.lower() for m in mods)


def _point(coordinate: list[int] | None, action: str) -> tuple[int, int]:
    if coordinate is None:
        raise ValueError(f"{action} needs --coordinate x y")
    return coordinate[0], coordinate[1]


def _screen(display: Display) -> dict[str, Any]:
    return {"base64_image": base64.b64encode(display.screenshot()).decode()}
