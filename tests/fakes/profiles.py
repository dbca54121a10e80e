"""HostFolders: the Linux profile with its staging folders and users' homes under a test's
folder, so its real scripts run with sh on this host (LocalShell) as they would in a guest."""

from __future__ import annotations

from pathlib import Path

from runner.profiles.linux import LinuxProfile
from typing_extensions import override


class HostFolders(LinuxProfile):
    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.root = root
        self.admin_task_dir = str(root / "admin-task")
        self.agent_task_dir = str(root / "agent-task")

    @override
    def home(self, user: str) -> str:
        return str(self.root / "home" / user)
