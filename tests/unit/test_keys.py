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
