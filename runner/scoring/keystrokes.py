"""What reached the guest's keyboard, from a trajectory: each key by its one name, the modifiers
held, and the character it typed (runner.scoring.safety's typed and keys rules read these)."""

from __future__ import annotations

from dataclasses import dataclass

from runner.display.keys import chord, keysym, shifted


@dataclass(frozen=True)
class Stroke:
    step: int
    key: str  # by its one name, as display.keys.chord gives it
    mods: frozenset[str]  # held, shift included when the display holds it
    text: str | None  # the character it types; None for a command or editing key


# X pastes its primary selection where the middle button is pressed: a stroke of its own.
MIDDLE = "middle button"
HELD = "held key"
# A call of an external MCP server's tool that the proxy could not map (runner.mcp.proxy), with
# text among its arguments: what it typed, if anything, no rule can read.
UNREAD = "unread call"
_INPUT_ARGUMENTS = ("text", "key", "keys", "combo", "hotkey", "chars", "string", "input", "value")
_KEY_TEXT = {"space": " ", "enter": "\n", "tab": "\t"}


def keystrokes_of(entries: list[dict], synced: bool) -> list[Stroke]:
    """Every key that reached the guest, in order, with the text each types. SYNCED: QEMU's
    lock-key sync gives a letter the case of the keysym sent, whatever shift or caps lock
    say; without it they decide, as on a keyboard. The checks read both, so neither hides text."""
    strokes: list[Stroke] = []
    caps = False
    for e in entries:
        args, step = e.get("arguments", {}), e.get("step", 0)
        if not _reached(e):
            continue
        if e.get("action") in ("click", "drag") and args.get("button") == "middle":
            strokes.append(Stroke(step, MIDDLE, frozenset(), None))
        elif e.get("action") == "call" and any(isinstance(args.get(a), (str, list)) for a in _INPUT_ARGUMENTS):
            strokes.append(Stroke(step, UNREAD, frozenset(), None))
        elif e.get("action") == "type":
            for char in str(args.get("text", "")):
                strokes += _pressed(step, char, (), synced, caps)
        elif e.get("action") == "key":
            key = str(args.get("key", ""))
            strokes += _pressed(step, key, [str(m) for m in args.get("modifiers", [])], synced, caps)
            caps ^= key.lower() == "capslock"
    return strokes


def _reached(entry: dict) -> bool:
    """Whether a call may have reached the guest: a ValueError is a bad argument, refused before
    anything was sent (Display's contract), so its text must not count as typed."""
    return not (entry.get("error") and str(entry.get("result", "")).startswith("error: ValueError"))


def _pressed(step: int, sent: str, modifiers: tuple[str, ...] | list[str], synced: bool, caps: bool) -> list[Stroke]:
    try:
        key, mods = chord(sent, modifiers)
    except ValueError:
        try:
            for name in (sent, *modifiers):
                keysym(name)
        except ValueError:
            return []  # an unknown key: the display refuses it, so nothing was sent
        # Known keys, one "held" that is no modifier: a display that held it (as ours once did)
        # typed it, as text no rule read.
        return [Stroke(step, HELD, frozenset(), None)]
    return [Stroke(step, key, mods, _key_text(sent, key, mods, synced=synced, caps=caps))]


def _key_text(sent: str, key: str, mods: frozenset[str], *, synced: bool, caps: bool) -> str | None:
    """The character a press types on a US layout: None for a command key (ctrl, alt or super
    held), an arrow, backspace... SENT is the key as the agent named it, KEY and MODS its chord."""
    if mods - {"shift"}:
        return None
    if key in _KEY_TEXT:
        return _KEY_TEXT[key]
    if len(key) != 1:
        return None
    if key.isalpha():
        upper = sent.isupper() if synced else ("shift" in mods) != caps
        return key.upper() if upper else key
    return shifted(key) if "shift" in mods else key


