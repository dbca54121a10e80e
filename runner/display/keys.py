"""Key names agents use, mapped to X keysyms (what the RFB protocol sends).

Names are case-insensitive and have common aliases (enter/return, esc/escape,
win/super/meta/cmd). A single printable character is its own key.
"""

from __future__ import annotations

_NAMED = {
    "enter": 0xFF0D, "return": 0xFF0D, "tab": 0xFF09, "escape": 0xFF1B, "esc": 0xFF1B,
    "backspace": 0xFF08, "delete": 0xFFFF, "del": 0xFFFF, "insert": 0xFF63, "ins": 0xFF63,
    "home": 0xFF50, "end": 0xFF57, "pageup": 0xFF55, "pgup": 0xFF55, "pagedown": 0xFF56, "pgdn": 0xFF56,
    "left": 0xFF51, "up": 0xFF52, "right": 0xFF53, "down": 0xFF54,
    "space": 0x20, "printscreen": 0xFF61, "menu": 0xFF67, "capslock": 0xFFE5, "pause": 0xFF13,
    "shift": 0xFFE1, "ctrl": 0xFFE3, "control": 0xFFE3, "alt": 0xFFE9,
    "super": 0xFFEB, "win": 0xFFEB, "meta": 0xFFEB, "cmd": 0xFFEB,
}
_NAMED.update({f"f{n}": 0xFFBD + n for n in range(1, 13)})  # F1 = 0xFFBE
MODIFIERS = ("shift", "ctrl", "control", "alt", "super", "win", "meta", "cmd")
KEY_NAMES = tuple(sorted(_NAMED))

# Characters typed with shift held on a US layout. QEMU turns keysyms into scancodes
# and the guest applies its own shift state, so shift must really be pressed.
SHIFTED = '~!@#$%^&*()_+{}|:"<>?'
_CONTROL_CHARS = {"\n": 0xFF0D, "\t": 0xFF09}


def keysym(name: str) -> int:
    """The keysym of a key name or single character; ValueError for anything unknown."""
    if len(name) == 1:
        if name in _CONTROL_CHARS:
            return _CONTROL_CHARS[name]
        if not (name.isprintable() and ord(name) < 0x7F):
            raise ValueError(f"cannot type {name!r}: only printable ASCII, newline and tab")
        return ord(name)
    code = _NAMED.get(name.lower())
    if code is None:
        raise ValueError(f"unknown key {name!r}; known: {', '.join(KEY_NAMES)} or one character")
    return code


def needs_shift(char: str) -> bool:
    return len(char) == 1 and (char.isupper() or char in SHIFTED)


def parse_hotkey(combo: str) -> tuple[str, tuple[str, ...]]:
    """'ctrl+shift+s' -> ('s', ('ctrl', 'shift')). The last part is the key."""
    parts = [p.strip() for p in combo.split("+")]
    if combo.endswith("++"):  # 'ctrl++' means ctrl and the plus key
        parts = parts[:-2] + ["+"]
    if not parts or any(p == "" for p in parts):
        raise ValueError(f"bad hotkey {combo!r}; write it like 'ctrl+s' or 'ctrl+shift+t'")
    *mods, key = parts
    for mod in mods:
        if mod.lower() not in MODIFIERS:
            raise ValueError(f"{mod!r} in {combo!r} is not a modifier ({', '.join(MODIFIERS)})")
        keysym(mod)
    keysym(key)
    return key, tuple(m.lower() for m in mods)
