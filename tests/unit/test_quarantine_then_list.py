"""The quarantine and the after-listing in one guest command: each part's failure is still its
own, the listing never runs when the quarantine failed, and the output is parted by a
boundary the agent cannot know. Run with sh on this host (LocalShell)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.display import LocalShell
from runner.errors import InfraError
from runner.profiles import DesktopUser
from runner.profiles.linux import LinuxProfile
from runner.scoring.quarantine import quarantine_then_list

USER = DesktopUser("alice", "/home/alice")


class ScriptedStop(LinuxProfile):
    """The Linux profile with a quarantine of the test's choosing (not one that kills processes here)."""

    def __init__(self, stop: str) -> None:
        self.stop = stop

    def quarantine_script(self, user, keep):
        return self.stop


class OneByOne(ScriptedStop):
    def chained_script(self, first, boundary, second):
        return None


class Counting(LocalShell):
    def __init__(self) -> None:
        self.commands = 0

    def run(self, script, timeout=60.0):
        self.commands += 1
        return super().run(script, timeout)


@pytest.fixture
def home(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "made-by-agent.txt").write_text("x")
    return tmp_path / "home"


def test_one_command_gives_what_was_stopped_and_the_listing(home):
    shell = Counting()
    # The agent may print anything while it is stopped, even something like a boundary.
    stopped, listing = quarantine_then_list(shell, USER, ScriptedStop("echo cu-run-listing-0000; echo froze 3"),
                                            (str(home),))
    assert shell.commands == 1
    assert stopped == "cu-run-listing-0000\nfroze 3"
    assert f"{home}/made-by-agent.txt" in listing.entries


def test_a_quarantine_that_fails_is_its_own_error_and_nothing_is_listed(home, tmp_path):
    guest = ScriptedStop("echo half; echo no freezer >&2; exit 5")
    with pytest.raises(InfraError, match="could not stop alice's processes.*exit 5.*no freezer"):
        quarantine_then_list(LocalShell(), USER, guest, (str(tmp_path / "never-listed"),))


def test_an_exit_inside_the_quarantine_ends_only_its_part(home):
    stopped, listing = quarantine_then_list(LocalShell(), USER, ScriptedStop("echo done; exit 0"), (str(home),))
    assert stopped == "done" and listing.entries


def test_a_listing_that_fails_is_its_own_error(home):
    class BrokenLister(ScriptedStop):
        def list_script(self, roots):
            return "echo lister broke >&2; exit 9\n"

    with pytest.raises(InfraError, match="listing the watched folders failed \\(exit 9\\): lister broke"):
        quarantine_then_list(LocalShell(), USER, BrokenLister("echo froze 1"), (str(home),))


def test_a_guest_that_runs_them_apart_gets_two_commands(home):
    shell = Counting()
    stopped, listing = quarantine_then_list(shell, USER, OneByOne("echo froze 2"), (str(home),))
    assert (shell.commands, stopped) == (2, "froze 2") and f"{home}/made-by-agent.txt" in listing.entries
