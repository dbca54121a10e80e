import pytest

from runner.display.keys import MODIFIERS, chord, keysym, modifier, needs_shift, parse_hotkey


@pytest.mark.parametrize("name,code", [
    ("enter", 0xFF0D), ("Return", 0xFF0D), ("esc", 0xFF1B), ("F1", 0xFFBE), ("f12", 0xFFC9),
    ("a", ord("a")), ("A", ord("A")), ("~", ord("~")), ("\n", 0xFF0D), ("\t", 0xFF09), ("win", 0xFFEB),
])
def test_known_keys(name, code):
    assert keysym(name) == code


@pytest.mark.parametrize("name", ["", "enterr", "ctrl-s", "é", "\x07", "f13"])
def test_unknown_keys_are_refused(name):
    with pytest.raises(ValueError):
        keysym(name)


def test_shifted_characters_of_a_us_layout():
    assert all(needs_shift(c) for c in 'AZ~!@#$%^&*()_+{}|:"<>?')
    assert not any(needs_shift(c) for c in "az09-=[]\\;',./` ")


@pytest.mark.parametrize("combo,parsed", [
    ("ctrl+s", ("s", ("ctrl",))),
    ("Ctrl+Shift+T", ("T", ("ctrl", "shift"))),
    ("alt+F4", ("F4", ("alt",))),
    ("enter", ("enter", ())),
    ("ctrl++", ("+", ("ctrl",))),
])
def test_hotkeys(combo, parsed):
    assert parse_hotkey(combo) == parsed


@pytest.mark.parametrize("combo", ["ctrl+", "s+ctrl", "ctrl+nosuchkey", "+", "hyper+s", "ctrl+a+b", "enter+x",
                                   "ctrl+capslock+t", "f1+f2", "ctrl+ +t"])
def test_bad_hotkeys(combo):
    with pytest.raises(ValueError):
        parse_hotkey(combo)


def test_typed_keys_are_paced_so_a_stalled_guest_loses_none(monkeypatch):
    """VncDisplay.type waits KEY_GAP_S after each key, twice that after a shifted one, so the
    guest's 16-byte PS/2 queue outlasts a stall of its vCPU. The chord and the sleep are the
    seams: what goes on the wire is checked against QEMU's VNC in tests/e2e/test_episode.py."""
    from runner.display import vnc

    sent, slept = [], []
    display = object.__new__(vnc.VncDisplay)  # no connection: only the pacing is under test
    display._key_delay = vnc.KEY_GAP_S
    monkeypatch.setattr(display, "_chord", lambda held, code: sent.append((tuple(held), code)), raising=False)
    monkeypatch.setattr(vnc.time, "sleep", slept.append)

    display.type("aB")
    assert sent == [((), keysym("a")), ((vnc._SHIFT,), keysym("B"))]
    assert slept == [vnc.KEY_GAP_S, 2 * vnc.KEY_GAP_S] and vnc.KEY_GAP_S >= 0.04
    slept.clear()
    display.type("ab", delay=0.001)  # an agent that asks for faster typing gets it
    assert slept == [0.001, 0.001]


# -- modifiers and chords as the guest receives them (trust issue)

@pytest.mark.parametrize("name", ["a", "A", "enter", "capslock", "tab", "space", "f1", "1", "+"])
def test_only_a_modifier_can_be_held(name):
    with pytest.raises(ValueError, match="is not a modifier"):
        modifier(name)


def test_every_modifier_name_is_one_of_four_keys_held_by_its_left_keysym():
    assert {modifier(m) for m in MODIFIERS} == {"shift", "ctrl", "alt", "super"}
    for name in MODIFIERS:
        assert keysym(name) == keysym(modifier(name)) == keysym(name.upper())
    assert modifier("Control_R") == "ctrl" and modifier("CMD") == modifier("meta_l") == "super"
    assert parse_hotkey("Control_R+Super_L+t") == ("t", ("control_r", "super_l"))


@pytest.mark.parametrize("a, b", [
    (("t", ["ctrl", "alt"]), ("t", ["alt", "control"])),
    (("t", ["ctrl_r"]), ("t", ["control"])),
    (("T", ["ctrl"]), ("t", ["ctrl", "shift"])),
    (("!", []), ("1", ["shift"])),
    (("+", ["ctrl"]), ("=", ["ctrl", "shift"])),
    (("del", ["control", "alt"]), ("Delete", ["alt", "ctrl_l"])),
    (("\n", []), ("Return", [])),
    ((" ", ["shift"]), ("space", ["shift_r"])),
    (("l", ["win"]), ("l", ["meta_r"])),
    (("L", ["win"]), ("l", ["super", "shift"])),
])
def test_chords_that_reach_the_guest_alike_are_equal(a, b):
    assert chord(*a) == chord(*b)


def test_chords_that_differ_are_not_equal():
    assert chord("t", ["ctrl"]) != chord("t", ["ctrl", "shift"])
    assert chord("1", []) != chord("!", [])
    with pytest.raises(ValueError):
        chord("t", ["ctrl", "r"])


def test_a_long_name_is_quoted_short_in_the_error():
    with pytest.raises(ValueError) as info:
        keysym("x" * 100_000)
    assert len(str(info.value)) < 2000
