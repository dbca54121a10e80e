"""host_folders: the Linux profile with its staging folders and users' homes under a test's
folder, so its real scripts run with sh on this host (LocalShell) as they would in a guest."""

from __future__ import annotations

from pathlib import Path

from runner.profiles.base import GuestProfile
from runner.profiles.linux import LinuxAccess, LinuxScripts, linux_profile
from runner.profiles.parts import Part


def host_folders(root: Path, name: str, *parts: Part) -> GuestProfile:
    """The linux guest named NAME whose homes are ROOT/home/USER and staging folders ROOT/admin-task
    and ROOT/agent-task, with PARTS in place of its own of the same kinds."""
    return linux_profile(name, access=LinuxAccess(homes=str(root / "home")),
                         scripts=LinuxScripts(str(root / "admin-task"), str(root / "agent-task"))).with_parts(*parts)
