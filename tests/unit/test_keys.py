import pytest

from runner.display.keys import keysym, needs_shift, parse_hotkey


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


@pytest.mark.parametrize("combo", ["ctrl+", "s+ctrl", "ctrl+nosuchkey", "+", "hyper+s"])
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
