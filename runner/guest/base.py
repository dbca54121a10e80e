"""The GuestShell interface. SSH (linux) and WinRM (windows) implement it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from runner.errors import OutputTooLarge


# The most a guest command's output (stdout and stderr together) may hold before the host stops
# reading and raises OutputTooLarge. A write-set listing of a large home is tens of MiB; an agent
# could make one of gigabytes (200,000 entries with 8 KiB names), and the host keeps it in memory.
MAX_OUTPUT_BYTES = 128 * 2**20


def output_too_large(where: str) -> OutputTooLarge:
    return OutputTooLarge(f"{where}: the guest's output passed {MAX_OUTPUT_BYTES // 2**20} MiB and the read was ended")


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class GuestShell(ABC):
    """Commands and files inside one guest.

    run() returns whatever the script did (a non-zero exit is a result, not an error);
    it raises CommandTimeout when the script outlives TIMEOUT seconds (the script is
    killed in the guest), and GuestUnreachable when the guest cannot be reached.
    """

    @abstractmethod
    def wait_ready(self, timeout: float) -> float:
        """Blocks until the shell answers; returns the seconds waited.

        Raises GuestUnreachable at the deadline, or at once on a permanent failure
        (wrong host key, refused credentials).
        """

    @abstractmethod
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        """Runs SCRIPT (any length) in the profile's shell."""

    @abstractmethod
    def put(self, local: Path, remote: str) -> None:
        """Copies a host file into the guest."""

    @abstractmethod
    def get(self, remote: str, local: Path) -> None:
        """Copies a guest file to the host."""

    @abstractmethod
    def close(self) -> None:
        """Closes the connection. Idempotent."""
