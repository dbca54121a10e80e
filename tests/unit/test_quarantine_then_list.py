"""Admin steps folded into the listing's guest command: the quarantine before the after-listing,
the home's hand-over before the before-listing. Each part's failure is still its own, the
listing never runs when the step before it failed, and the output is parted by a boundary
the agent cannot know. Run with sh on this host (LocalShell)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.display import LocalShell
from runner.errors import CommandTimeout, InfraError
from runner.profiles import DesktopUser, get_profile
from runner.profiles.linux import LinuxQuarantine, LinuxScripts
from runner.profiles.linux_listing import LinuxLister
from runner.scoring.quarantine import quarantine_then_list
from runner.profiles.listing import Watch
from runner.tasks.scripts import hand_home_then_list
from typing_extensions import override

USER = DesktopUser("alice", "/home/alice")


class ScriptedStop(LinuxQuarantine):
    """A quarantine of the test's choosing (not one that kills processes here)."""

    def __init__(self, stop: str) -> None:
        self.stop = stop

    @override
    def quarantine_script(self, user, keep):
        return self.stop


def stopping(stop: str, *parts, scripts=None):
    """The Linux profile whose quarantine runs STOP, with PARTS (and SCRIPTS) in place of its own."""
    return get_profile("linux").with_parts(ScriptedStop(stop), *parts, scripts=scripts)


class OneByOne(LinuxScripts):
    @override
    def chained_script(self, first, boundary, second):
        return None


class Counting(LocalShell):
    def __init__(self) -> None:
        self.commands = 0

    @override
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
    stopped, listing = quarantine_then_list(shell, USER, stopping("echo cu-run-listing-0000; echo froze 3"),
                                            Watch((str(home),)))
    assert shell.commands == 1
    assert stopped == "cu-run-listing-0000\nfroze 3"
    assert f"{home}/made-by-agent.txt" in listing.entries


def test_a_quarantine_that_fails_is_its_own_error_and_nothing_is_listed(home, tmp_path):
    guest = stopping("echo half; echo no freezer >&2; exit 5")
    with pytest.raises(InfraError, match="could not stop alice's processes.*exit 5.*no freezer"):
        quarantine_then_list(LocalShell(), USER, guest, Watch((str(tmp_path / "never-listed"),)))


def test_an_exit_inside_the_quarantine_ends_only_its_part(home):
    stopped, listing = quarantine_then_list(LocalShell(), USER, stopping("echo done; exit 0"), Watch((str(home),)))
    assert stopped == "done" and listing.entries


def test_a_listing_that_fails_is_its_own_error(home):
    class BrokenLister(LinuxLister):
        @override
        def list_script(self, watch):
            return "echo lister broke >&2; exit 9\n"

    with pytest.raises(InfraError, match="listing the watched folders failed \\(exit 9\\): lister broke"):
        quarantine_then_list(LocalShell(), USER, stopping("echo froze 1", BrokenLister()), Watch((str(home),)))


def test_a_guest_that_runs_them_apart_gets_two_commands(home):
    shell = Counting()
    stopped, listing = quarantine_then_list(shell, USER, stopping("echo froze 2", scripts=OneByOne()), Watch((str(home),)))
    assert (shell.commands, stopped) == (2, "froze 2") and f"{home}/made-by-agent.txt" in listing.entries


# -- the home handed over, then the before-listing: also one command


class ScriptedHandOver(LinuxScripts):
    def __init__(self, hand: str, chained: bool = True) -> None:
        super().__init__()
        self.hand, self.chained = hand, chained

    @override
    def hand_home_script(self, user):
        return self.hand

    @override
    def chained_script(self, first, boundary, second):
        return super().chained_script(first, boundary, second) if self.chained else None


class TaskOn:
    """What hand_home_then_list reads of a task: its guest profile, here with SCRIPTS."""

    def __init__(self, scripts: LinuxScripts) -> None:
        self.guest = get_profile("linux").with_parts(scripts=scripts)


def test_handing_the_home_over_and_the_before_listing_are_one_command(home):
    shell = Counting()
    listing = hand_home_then_list(shell, TaskOn(ScriptedHandOver(f"echo cu-run-listing-1; touch {home}/handed")),
                                  USER, Watch((str(home),)))
    assert shell.commands == 1
    # The listing starts after the hand-over, so it sees what the hand-over did.
    assert {f"{home}/made-by-agent.txt", f"{home}/handed"} <= set(listing.entries)


def test_a_hand_over_that_fails_is_its_own_error_and_nothing_is_listed(tmp_path):
    with pytest.raises(InfraError, match="could not give what setup made in /home/alice to alice: chown failed"):
        hand_home_then_list(LocalShell(), TaskOn(ScriptedHandOver("echo chown failed >&2; exit 1")), USER,
                            Watch((str(tmp_path / "never-listed"),)))


def test_a_guest_that_runs_them_apart_hands_over_then_lists(home):
    shell = Counting()
    listing = hand_home_then_list(shell, TaskOn(ScriptedHandOver(f"touch {home}/handed", chained=False)), USER,
                                  Watch((str(home),)))
    assert shell.commands == 2 and f"{home}/handed" in listing.entries


@pytest.mark.parametrize("stop, part", [("sleep 30", "stopping alice's processes"),
                                        ("echo froze 1", "listing the watched folders")])
def test_a_timeout_names_the_part_that_ran_past_it(home, tmp_path, monkeypatch, stop, part):
    # Over the QEMU guest agent's shell (against FakeQemuAgent), which keeps what a killed
    # command printed: whether the boundary was printed says which part ran too long.
    from fakes.qemu_agent import FakeQemuAgent
    from runner.guest.qga import QemuAgentShell
    from runner.scoring import quarantine as q
    from runner.profiles import listing

    class SlowLister(LinuxLister):
        @override
        def list_script(self, watch):
            return "sleep 30\n"

    monkeypatch.setattr(q, "QUARANTINE_TIMEOUT", 0.5)
    monkeypatch.setattr(listing, "LIST_TIMEOUT", 0.5)
    shell = QemuAgentShell(FakeQemuAgent(), environment={"PATH": "/usr/bin:/bin"}, spool=str(tmp_path / "spool"))
    with pytest.raises(CommandTimeout, match=f"^{part}: command ran past"):
        quarantine_then_list(shell, USER, stopping(stop, SlowLister()), Watch((str(home),)))
