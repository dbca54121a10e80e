"""The error types every layer raises.

"The infrastructure broke" is an exception; "the task failed" is a result value.
Every error carries a message for a person and, where there is one, the fix.
"""

from __future__ import annotations

from enum import IntEnum

from typing_extensions import override


class ExitCode(IntEnum):
    """What `cu-run` exits with: the README's table, which a unit test holds to this one."""

    OK = 0  # the command did its work (a run completed, whatever the agent scored)
    BAD_INPUT = 1  # a task, a suite, a file or a name that is wrong or missing
    BAD_OPTION = 2  # a misspelt option or a bad value for one (the command line's parser)
    INFRA = 3  # infrastructure errors left episodes unscored, or a planned episode has no result
    GATE = 4  # --fail-under missed, validate found an oracle that failed or a nop that passed, or audit an unsafe pair
    INTERRUPTED = 130  # Ctrl-C or SIGTERM; `--resume` continues a run


class CuRunError(Exception):
    """Base of every error cu-run reports to a user as a message, not a traceback."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    @override
    def __str__(self) -> str:
        return f"{self.message}\n  fix: {self.fix}" if self.fix else self.message


class UsageError(CuRunError):
    """Bad input from the user: a flag, a file, a name that does not exist."""


class InfraError(CuRunError):
    """The machinery under an episode broke (libvirt, QEMU, the guest's shell or screen).

    Never scored as the agent's failure; the scheduler may retry on a fresh VM.
    """


class HostFault(InfraError):
    """What the host itself sees wrong with a VM (QEMU gone or stopped, libvirt gone): never the agent's."""


class GuestStopped(InfraError):
    """The guest powered itself off or reset (the host saw its shutdown come from inside): the
    infrastructure's only before the agent acted, the agent's doing after (runner.scoring.blame)."""


class GuestUnreachable(InfraError):
    """The guest's shell or screen did not answer (VM dead, port closed, auth refused)."""


class CommandTimeout(CuRunError):
    """A command in the guest ran past its wall-clock limit and was killed."""

    def __init__(self, message: str, *, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


class OutputTooLarge(CuRunError):
    """A guest command sent more than the host reads (runner.guest.base.MAX_OUTPUT_BYTES): the
    read was ended there, so a guest cannot cost the host its memory. Not the infrastructure's:
    after the agent, the agent's doing (runner.scoring.blame)."""

