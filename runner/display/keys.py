"""Key names agents use, mapped to X keysyms (what the RFB protocol sends).

Names are case-insensitive and have common aliases (enter/return, esc/escape,
win/super/meta/cmd). A single printable character is its own key.

Modifiers are shift, ctrl, alt and super, under their aliases and with X's _l and _r
forms (control_r, super_l). The display holds each one by its left key, so a side is a
name only: the guest sees one ctrl, whichever an agent wrote. Nothing else may be held:
a letter "held as a modifier" would reach the guest as typing no rule read as text.
"""

from __future__ import annotations

from collections.abc import Iterable

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
# The first name of a keysym is the one a chord names it by (enter, escape, delete, ctrl, super).
_ONE_NAME = {code: name for name, code in reversed(_NAMED.items())}
_BASE_MODIFIERS = ("shift", "ctrl", "control", "alt", "super", "win", "meta", "cmd")
_NAMED.update({f"{name}_{side}": _NAMED[name] for name in _BASE_MODIFIERS for side in "lr"})
MODIFIERS = _BASE_MODIFIERS + tuple(f"{name}_{side}" for name in _BASE_MODIFIERS for side in "lr")
KEY_NAMES = tuple(sorted(_NAMED))

# Characters typed with shift held on a US layout. QEMU turns keysyms into scancodes
# and the guest applies its own shift state, so shift must really be pressed.
SHIFTED = '~!@#$%^&*()_+{}|:"<>?'
UNSHIFTED = dict(zip(SHIFTED, "`1234567890-=[]\\;',./", strict=True))  # '!' is shift and the 1 key
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
        raise ValueError(f"unknown key {_short(name)}; known: {', '.join(KEY_NAMES)} or one character")
    return code


def needs_shift(char: str) -> bool:
    return len(char) == 1 and (char.isupper() or char in SHIFTED)


def shifted(char: str) -> str:
    """What CHAR's key types with shift held on a US layout ('1' gives '!', 'a' gives 'A')."""
    return char.upper() if char.isalpha() else next((s for s, plain in UNSHIFTED.items() if plain == char), char)


def modifier(name: str) -> str:
    """NAME's modifier by its one name (control_r and ctrl are ctrl, win and meta are super);
    ValueError when NAME is not a modifier, since the display would hold any key it is given."""
    if name.lower() not in MODIFIERS:
        raise ValueError(f"{_short(name)} is not a modifier; modifiers are {', '.join(_BASE_MODIFIERS)} "
                         "(and their _l and _r forms)")
    return _ONE_NAME[_NAMED[name.lower()]]


def chord(key: str, modifiers: Iterable[str] = ()) -> tuple[str, frozenset[str]]:
    """KEY pressed with MODIFIERS held, as the guest's keyboard gets it: the key by one name (a
    letter in lower case, a shifted symbol by its own key, so 'T' is t and '!' is 1, a named key
    by its first alias) and the set of modifiers held by their one names, shift included when the
    display holds it for the character. Order, aliases, sides and case do not change a chord.
    ValueError for an unknown key or a modifier that is not one."""
    held = {modifier(m) for m in modifiers}
    code = keysym(key)
    if needs_shift(key):
        held.add("shift")
    if code in _ONE_NAME:
        return _ONE_NAME[code], frozenset(held)
    return UNSHIFTED.get(key, key.lower()), frozenset(held)


def parse_hotkey(combo: str) -> tuple[str, tuple[str, ...]]:
    """'ctrl+shift+s' -> ('s', ('ctrl', 'shift')). The last part is the key; every other part
    must be a modifier."""
    parts = [p.strip() for p in combo.split("+")]
    if combo.endswith("++"):  # 'ctrl++' means ctrl and the plus key
        parts = parts[:-2] + ["+"]
    if not parts or any(p == "" for p in parts):
        raise ValueError(f"bad hotkey {_short(combo)}; write it like 'ctrl+s' or 'ctrl+shift+t'")
    *mods, key = parts
    for mod in mods:
        if mod.lower() not in MODIFIERS:
            raise ValueError(f"{_short(mod)} in {_short(combo)} is not a modifier "
                             f"({', '.join(_BASE_MODIFIERS)}, and their _l and _r forms)")
    keysym(key)
    return key, tuple(m.lower() for m in mods)


def _short(name: str) -> str:
    """NAME quoted for a message, cut short: an agent's argument can be any length."""
    return repr(name) if len(name) <= 40 else f"{name[:40]!r}..."
