"""The run's choices as enums, made from text once, at the edge (the CLI, the Python API, a study
file, an Inspect sample): the layers below take the enum and check nothing again.

Each is a StrEnum, so a value is also its text: it compares equal to "warm", and run.json holds
it as "warm".
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from runner.errors import UsageError


class AccelChoice(StrEnum):
    """--accel: which accelerator the VMs run under; auto probes KVM and falls back to TCG."""

    auto = "auto"
    kvm = "kvm"
    tcg = "tcg"


class StartChoice(StrEnum):
    """--start: warm restores a saved state, cold boots; auto is warm when every slot has a valid state."""

    auto = "auto"
    warm = "warm"
    cold = "cold"


class Gate(StrEnum):
    """--gate: what --fail-under measures: every task, or only the stable (non-flaky) ones."""

    all = "all"
    stable = "stable"


class NetMode(StrEnum):
    """--net: how a networked task's proxy answers: live (the allowed origins themselves), record
    (live, each episode's answers written to its cassette), replay (the task's cassette alone)."""

    live = "live"
    record = "record"
    replay = "replay"


Choice = TypeVar("Choice", bound=StrEnum)


def chosen(kind: type[Choice], value: str | Choice, flag: str) -> Choice:
    """VALUE as KIND, or UsageError naming FLAG and the choices."""
    try:
        return kind(value)
    except ValueError:
        raise UsageError(f"{flag} must be one of {', '.join(kind)}, not {value!r}") from None
