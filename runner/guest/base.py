"""The GuestShell interface. SSH (linux) and WinRM (windows) implement it."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runner.errors import GuestUnreachable, OutputTooLarge


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

    def freezer(self) -> FilesystemFreezer | None:
        """What freezes the guest's filesystems from outside any of its processes (the QEMU guest
        agent does), so that the host can read its disk as the guest would; None for a shell that
        cannot (a freeze asked over SSH would be asked of a process the guest's root could replace)."""
        return None


class FilesystemFreezer(Protocol):
    def freeze_filesystems(self) -> int:
        """Freezes the guest's filesystems; returns how many. Raises when it could not."""

    def thaw_filesystems(self) -> None: ...


class NotReady(Exception):
    """A shell's readiness check failed in a way that passes: the guest is still coming up. Its
    cause is the failure, said if the wait runs out."""


def poll_until_ready(what: str, timeout: float, pause: float, attempt: Callable[[float], None]) -> float:
    """The wait_ready loop every shell shares: ATTEMPT(seconds left) until it returns, pausing
    PAUSE between tries; NotReady from it is tried again, anything else raised at once (a
    permanent refusal). Returns the seconds waited; GuestUnreachable, naming WHAT and the last
    failure, at the deadline."""
    started = time.monotonic()
    deadline = started + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            attempt(max(0.0, deadline - time.monotonic()))
            return time.monotonic() - started
        except NotReady as not_yet:
            last = not_yet.__cause__ or not_yet
        time.sleep(pause)
    raise GuestUnreachable(f"{what} did not answer within {timeout:.0f} s (last: {type(last).__name__}: {last})")
