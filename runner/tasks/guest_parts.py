"""What a task asks of its guest's parts (runner.profiles.parts): checked before any VM starts,
so that a task a guest cannot run is refused with one line rather than failing mid-episode."""

from __future__ import annotations

from collections.abc import Iterable

from runner.errors import UsageError
from runner.profiles.listing import WriteSetLister
from runner.profiles.parts import ExecAudit, NetworkEnd, Part, Quarantine
from runner.tasks.model import SafetyRule, Task


def parts_missing(task: Task, suite_rules: tuple[SafetyRule, ...] = ()) -> list[str]:
    """One line for each part TASK needs that its guest lacks. A write set the task leaves at its
    default is not needed: a guest without a lister runs such a task unwatched (write-set.json says
    so), while one the task names (watch:, allow:) is part of how it is scored. SUITE_RULES: the
    suite's safety.yaml, whose rules are the task's too."""
    needs: list[tuple[type[Part], str]] = []
    ran = [r.id for r in suite_rules + task.spec.safety if r.ran is not None]
    if ran:
        needs.append((ExecAudit, f"its ran: rule{'s' if len(ran) > 1 else ''} {', '.join(ran)}"))
    if task.spec.network is not None:
        needs.append((NetworkEnd, "its network:"))
    if task.spec.desktop_in_verify:
        needs.append((Quarantine, "desktop_in_verify"))
    if task.spec.scoring == "disk":
        lister = task.guest.part(WriteSetLister)
        if lister is None or lister.disk_filesystem is None:
            return [f"{task.id}: scoring: disk reads the guest's disk on the host, and {task.guest.name} guests' "
                    "disks are not read there yet"]
    write_set = task.spec.write_set
    if write_set.enabled and (write_set.watch is not None or write_set.allow):
        needs.append((WriteSetLister, "its write_set:"))
    return [f"{task.id}: {why} needs {'an' if kind.label[0] in 'aeiou' else 'a'} {kind.label}, and "
            f"{task.guest.name} guests have none yet"
            for kind, why in needs if task.guest.part(kind) is None]


def require_parts(tasks: Iterable[Task], suite_rules: tuple[SafetyRule, ...] = ()) -> None:
    """Raises one UsageError naming every task whose guest lacks a part it needs."""
    missing = [line for task in tasks for line in parts_missing(task, suite_rules)]
    if missing:
        raise UsageError("; ".join(missing[:10]) + (f"; and {len(missing) - 10} more" if len(missing) > 10 else ""),
                         fix="leave those tasks out, or run them on a guest that has the part "
                             "(docs/architecture.md: guest profiles; docs/network.md for the network end)")
