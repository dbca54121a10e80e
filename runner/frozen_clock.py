"""A process of the runner's that runs at a task's frozen clock (docs/network.md): the environment
that starts its clock at the instant, through libfaketime, and lets it run on. Host-side scoring
and an episode's proxy run this way, so they agree with the guest on the date."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from runner.errors import UsageError

FAKETIME_LIBRARY = "libfaketime.so.1"


def frozen_clock_env(clock: datetime, why: str) -> dict[str, str]:
    """The variables that start a process's clock at CLOCK. WHY: what needs it, for the error when
    libfaketime is missing."""
    found = sorted(Path("/usr/lib").glob(f"*/faketime/{FAKETIME_LIBRARY}"))
    if not found:
        raise UsageError(f"{FAKETIME_LIBRARY} is not installed, and {why} at a task's frozen clock",
                         fix="scripts/setup-host.sh installs it (apt-get install faketime)")
    return {"LD_PRELOAD": str(found[0]), "FAKETIME": f"@{clock.astimezone(UTC):%Y-%m-%d %H:%M:%S}", "TZ": "UTC",
            # Timeouts and sleeps keep the real monotonic clock.
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
