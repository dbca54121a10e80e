"""quarantine_then_read_disk: the quarantine, then the guest's filesystems frozen while the host
reads the write set from the disk image, and thawed whatever the read came to. The admin
channel is a fake at its narrowest seam (the three calls this makes of the guest agent's
shell); the disk is a real ext4 image made by mkfs.ext4."""

import subprocess

import pytest

from runner.errors import InfraError
from runner.guest.base import ExecResult
from runner.guest.qga import AgentCommandFailed
from runner.profiles import DesktopUser, get_profile
from runner.scoring.quarantine import quarantine_then_read_disk
from runner.profiles.listing import Watch

USER = DesktopUser("cu", "/home/cu")


class FakeAgentShell:
    """What quarantine_then_read_disk asks of QemuAgentShell, recorded in order."""

    def __init__(self, freeze_fails: bool = False) -> None:
        self.calls: list[str] = []
        self.freeze_fails = freeze_fails

    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        self.calls.append("quarantine")
        return ExecResult(0, "froze 3 processes of the desktop user\n", "")

    def freeze_filesystems(self) -> int:
        self.calls.append("freeze")
        if self.freeze_fails:
            raise AgentCommandFailed("guest-fsfreeze-freeze: Device or resource busy")
        return 1

    def thaw_filesystems(self) -> None:
        self.calls.append("thaw")

    def freezer(self) -> "FakeAgentShell":
        return self


@pytest.fixture
def disk(tmp_path):
    tree = tmp_path / "tree" / "home" / "cu"
    tree.mkdir(parents=True)
    (tree / "notes.txt").write_text("kept")
    raw = tmp_path / "disk.raw"
    subprocess.run(["mkfs.ext4", "-q", "-b", "4096", "-d", str(tmp_path / "tree"), str(raw), "32M"], check=True)
    return raw


def test_the_listing_is_read_from_the_disk_between_the_freeze_and_the_thaw(disk):
    admin = FakeAgentShell()
    stopped, listing = quarantine_then_read_disk(admin, USER, get_profile("linux"), Watch(("/home/cu",)), disk)
    assert admin.calls == ["quarantine", "freeze", "thaw"]
    assert stopped == "froze 3 processes of the desktop user"
    assert listing.read_from == "disk" and listing.entries["/home/cu/notes.txt"].size == 4


def test_a_disk_that_does_not_read_is_an_infra_error_and_the_guest_is_thawed(tmp_path):
    bad = tmp_path / "disk.raw"
    bad.write_bytes(bytes(8 * 2**20))  # no filesystem on it
    admin = FakeAgentShell()
    with pytest.raises(InfraError, match="the guest.s disk could not be read: no ext4 superblock"):
        quarantine_then_read_disk(admin, USER, get_profile("linux"), Watch(("/home/cu",)), bad)
    assert admin.calls == ["quarantine", "freeze", "thaw"]


def test_a_freeze_that_fails_reads_nothing(disk):
    admin = FakeAgentShell(freeze_fails=True)
    with pytest.raises(InfraError, match="could not freeze the guest's filesystems"):
        quarantine_then_read_disk(admin, USER, get_profile("linux"), Watch(("/home/cu",)), disk)
    assert admin.calls == ["quarantine", "freeze"]
