"""The Windows walks of a profile (issue 51, item 9): the write-set listing and hand-home are
programs in guest_agent/windows, sent with their parameters filled in, and neither enters a
folder whose items the ignore patterns all cover. PowerShell does not run here: the programs
are parsed, the parameters read back from the text the runner sends, and the prune rule
checked against the host's own matcher."""

import re

import pytest

from runner.config import PROJECT_ROOT
from runner.errors import InfraError
from runner.profiles import DesktopUser, get_profile
from runner.profiles.listing import (HASH_BUDGET_S, HASH_MAX_BYTES, MAX_ENTRIES, Entry, Watch, expand, matches,
                                     pruned_folders)
from runner.tasks.syntax import powershell_errors, powershell_mistakes, script_errors
from runner.profiles.listing import WriteSetLister

WINDOWS = get_profile("windows")
USER = DesktopUser("cu", "C:\\Users\\cu")
PROGRAMS = PROJECT_ROOT / "guest_agent" / "windows"
# What no value may break out of: every quote PowerShell's tokenizer ends a string at, its
# escape character, subexpressions, comments, braces, a newline, a NUL, and non-BMP text.
NASTY = "it's \u2018a\u2019 \u201a\u201b \"$(Stop-Computer)\" `n ${x} # } ) ; \r\n\x00 \U0001F600 -Roots"


def default_ignore() -> tuple[str, ...]:
    return tuple(expand(p, USER.home) for p in WINDOWS.part(WriteSetLister).default_ignore)


def arguments(program: str, name: str, call: str = "&") -> dict[str, object]:
    """The arguments of the guest program NAME (under guest_agent/windows) as the runner sends it,
    read back strictly: CALL (& or .) and the file's text unchanged, then only -Name and values of
    the forms runner.guest.programs.ps_value writes."""
    head = call + " {\r\n" + (PROGRAMS / name).read_text() + "\r\n} "
    assert program.startswith(head) and program.endswith("\r\n")
    tail = program[len(head):-2]
    assert all(" " <= c <= "~" for c in tail), "a value left printable ASCII"
    found: dict[str, object] = {}
    pos = 0

    def take(pattern: str) -> re.Match:
        nonlocal pos
        match = re.compile(pattern).match(tail, pos)
        assert match, f"not a value ps_value writes, at {tail[pos:pos + 40]!r}"
        pos = match.end()
        return match

    def literal() -> str:
        if tail.startswith("(", pos):
            take(r"\(")
            parts = [literal_part()]
            while tail.startswith(" + ", pos):
                take(r" \+ ")
                parts.append(literal_part())
            take(r"\)")
            text = "".join(parts)
            return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return literal_part()

    def literal_part() -> str:
        if tail.startswith("[char]", pos):
            unit = int(take(r"\[char\]0x([0-9A-F]{4})").group(1), 16)
            return unit.to_bytes(2, "little").decode("utf-16-le", "surrogatepass")
        return take(r"'((?:[^']|'')*)'").group(1).replace("''", "'")

    while pos < len(tail):
        key = take(r"-([A-Za-z]+) ").group(1)
        if tail.startswith("@(", pos):
            take(r"@\(")
            values = []
            while not tail.startswith(")", pos):
                values.append(literal())
                if tail.startswith(", ", pos):
                    take(", ")
            take(r"\)")
            found[key] = tuple(values)
        elif tail[pos] in "'(":
            found[key] = literal()
        else:
            found[key] = take(r"[0-9.e+-]+").group(0)
        if pos < len(tail):
            take(" ")
    return found


@pytest.mark.parametrize("name", ["list-tree.ps1", "hand-home.ps1"])
def test_the_programs_parse_and_fall_into_no_known_trap(name):
    assert script_errors(PROGRAMS / name) == []
    assert powershell_mistakes((PROGRAMS / name).read_text()) == []


def test_the_listing_sent_prunes_each_folder_the_patterns_cover():
    ignore = (*default_ignore(), "C:\\evals\\cache\\**", "C:\\evals\\*.tmp", USER.home + "\\Documents\\big")
    watch = Watch(("C:\\evals", USER.home), ignore)
    program = WINDOWS.part(WriteSetLister).list_script(watch)
    assert powershell_errors(program.encode()) == []
    sent = arguments(program, "list-tree.ps1")
    assert sent["Roots"] == watch.roots
    # Derived from the patterns: each FOLDER\** without another wildcard, each wildcard-free one.
    wanted = [p[:-3] for p in ignore if p.endswith("\\**") and not re.search(r"[*?]", p[:-3])]
    wanted += [p for p in ignore if not re.search(r"[*?]", p)]
    assert sorted(sent["Pruned"]) == sorted(wanted)
    assert USER.home + "\\AppData" in sent["Pruned"]
    assert [float(sent[k]) for k in ("MaxEntries", "HashMaxBytes", "HashBudgetSeconds")] == [
        MAX_ENTRIES, HASH_MAX_BYTES, HASH_BUDGET_S]


def test_hand_home_enters_no_folder_default_ignore_covers():
    program = WINDOWS.scripts.hand_home_script(USER)
    assert powershell_errors(program.encode()) == []
    assert arguments(program, "hand-home.ps1") == {"HomeFolder": USER.home, "UserName": "cu",
                                                   "Pruned": (USER.home + "\\AppData",)}


def test_no_value_breaks_out_of_the_parameters():
    user = DesktopUser("o'brien\u2019", "C:\\Users\\" + NASTY)
    for name, program, wanted in [
            ("list-tree.ps1",
             WINDOWS.part(WriteSetLister).list_script(Watch(("C:\\" + NASTY, "C:\\evals"), ("C:\\" + NASTY + "\\**",))),
             {"Roots": ("C:\\" + NASTY, "C:\\evals"), "Pruned": ("C:\\" + NASTY,)}),
            ("hand-home.ps1", WINDOWS.scripts.hand_home_script(user),
             {"HomeFolder": user.home, "UserName": user.name, "Pruned": (user.home + "\\AppData",)})]:
        sent = arguments(program, name)
        assert {k: sent[k] for k in wanted} == wanted
        assert powershell_errors(program.encode()) == []


# -- the prune rule (runner.profiles.listing.pruned_folders), which the bench's model shares

@pytest.mark.parametrize("pattern, folder", [
    ("C:\\Users\\cu\\AppData\\**", "C:\\Users\\cu\\AppData"),
    ("C:\\Users\\cu\\AppData\\**\\", "C:\\Users\\cu\\AppData"),
    ("C:\\evals\\big", "C:\\evals\\big"),
    ("C:\\evals\\big\\", "C:\\evals\\big"),
    ("C:\\evals\\it's [odd] (1)\\**", "C:\\evals\\it's [odd] (1)"),
    ("C:\\Users\\cu\\*.log*", None),
    ("C:\\Users\\cu\\NTUSER.DAT*", None),
    ("C:\\evals\\**\\cache\\**", None),
    ("C:\\evals\\a?\\**", None),
    ("C:\\evals\\*", None),  # its items, yes, but only FOLDER and FOLDER\** are taken
    ("C:\\**", "C:"),  # right, and idle: a walk names the drive's root C:\, never C:
    ("C:\\\\**", None),  # C:\'s items are C:\x, which this pattern does not match
    ("**", None),
])
def test_the_folders_pruned_for_a_pattern(pattern, folder):
    assert pruned_folders((pattern,), windows=True) == ((folder,) if folder else ())


@pytest.mark.parametrize("pattern", [
    "C:\\Users\\cu\\AppData\\**", "C:\\evals\\big", "C:\\evals\\big\\", "C:\\evals\\it's [odd] (1)\\**",
    "C:\\Users\\Jos\u00e9\\AppData\\**", "C:\\x.y+z$\\**", "C:\\**"])
@pytest.mark.parametrize("below", ["a", "A b.txt", "x\\y\\z", ".hidden\\deep\\er", "\u2028\u00c5", "**"])
def test_the_host_ignores_everything_under_a_pruned_folder(pattern, below):
    """What makes pruning safe: the host's matcher covers each path a lister leaves out."""
    (folder,) = pruned_folders((pattern,), windows=True)
    assert matches(folder + "\\" + below, pattern, windows=True)


def test_the_profile_prunes_appdata_and_the_walks_say_so():
    assert pruned_folders(default_ignore(), windows=True) == (USER.home + "\\AppData",)
    for name in ("list-tree.ps1", "hand-home.ps1"):
        text = (PROGRAMS / name).read_text()
        # The program keeps the folders it is given, and enters none of them.
        assert "$prune.Contains($folder.FullName)" in text and "foreach ($folder in $Pruned)" in text


# -- reading the listing back

def test_the_listing_is_split_on_newlines_only():
    """A name may hold U+2028 or U+0085: str.splitlines would cut its path, and the cut one could
    stand for another item's (here C:\\evals\\a)."""
    odd = "C:\\evals\\a\u2028b\u0085c.txt"
    listing = WINDOWS.part(WriteSetLister).parse_listing(f"f\t3\t10000000\tAB\t{odd}\r\nd\t0\t0\t\tC:\\evals\\d\r\n")
    assert listing.entries == {odd: Entry("f", 3, "ab", 1.0), "C:\\evals\\d": Entry("d", 0, "", 0.0)}


def test_a_path_listed_twice_or_a_bad_line_is_refused():
    with pytest.raises(InfraError, match="does not print"):
        WINDOWS.part(WriteSetLister).parse_listing("f\t1\t0\t\tC:\\evals\\a\r\nf\t2\t0\t\tC:\\evals\\a\r\n")
    with pytest.raises(InfraError, match="does not print"):
        WINDOWS.part(WriteSetLister).parse_listing("f\tbig\t0\t\tC:\\evals\\a\r\n")
    with pytest.raises(InfraError, match="does not print"):
        WINDOWS.part(WriteSetLister).parse_listing("l\t1\t0\t\tC:\\evals\\a\r\n")
    assert WINDOWS.part(WriteSetLister).parse_listing("WARNING: something\r\ntruncated\r\n").truncated
