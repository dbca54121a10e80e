"""What a task asks of its guest's parts (runner.profiles.parts): checked before any VM starts,
so that a task a guest cannot run is refused with one line rather than failing mid-episode."""

from __future__ import annotations

from collections.abc import Iterable

from runner.errors import UsageError
from runner.profiles.listing import WriteSetLister
from runner.profiles.parts import NetworkEnd, Part, Quarantine
from runner.tasks.model import Task


def parts_missing(task: Task) -> list[str]:
    """One line for each part TASK needs that its guest lacks. A write set the task leaves at its
    default is not needed: a guest without a lister runs such a task unwatched (write-set.json says
    so), while one the task names (watch:, allow:) is part of how it is scored."""
    needs: list[tuple[type[Part], str]] = []
    if task.spec.network is not None:
        needs.append((NetworkEnd, "its network:"))
    if task.spec.desktop_in_verify:
        needs.append((Quarantine, "desktop_in_verify"))
    write_set = task.spec.write_set
    if write_set.enabled and (write_set.watch is not None or write_set.allow):
        needs.append((WriteSetLister, "its write_set:"))
    return [f"{task.id}: {why} needs a {kind.label}, and {task.guest.name} guests have none yet"
            for kind, why in needs if task.guest.part(kind) is None]


def require_parts(tasks: Iterable[Task]) -> None:
    """Raises one UsageError naming every task whose guest lacks a part it needs."""
    missing = [line for task in tasks for line in parts_missing(task)]
    if missing:
        raise UsageError("; ".join(missing[:10]) + (f"; and {len(missing) - 10} more" if len(missing) > 10 else ""),
                         fix="leave those tasks out, or run them on a guest that has the part "
                             "(docs/architecture.md: guest profiles; docs/network.md for the network end)")
