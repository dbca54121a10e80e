"""Choosing how a run's VMs start: warm (restore each slot's saved state), cold (boot), or
auto, which is warm when every slot has a current state and cold, saying why, when not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runner.choices import StartChoice
from runner.images.catalog import Image
from runner.errors import UsageError
from runner.hypervisor.domain_xml import Accel
from runner.hypervisor.host import Host
from runner.vm.warm_state import WarmSlot, current_deps, list_slots, load_slot, stale_reasons


@dataclass(frozen=True)
class StartPlan:
    mode: Literal["warm", "cold"]
    slots: dict[int, WarmSlot]  # pool slot -> its warm state (empty when cold)
    notice: str | None = None  # why auto chose cold
    # Valid warm states beyond the pool's: a slot restores one of these while its last VM is
    # still being torn down, so teardown leaves the slot's critical path.
    spares: tuple[WarmSlot, ...] = ()


def plan_start(requested: StartChoice, host: Host, image: Image, accel: Accel, libvirt_uri: str,
               vm_pool: int) -> StartPlan:
    """warm: every slot needs a valid state, else UsageError naming what is wrong.
    auto: warm when that holds, else cold with a one-line notice. cold: cold.
    REQUESTED was made a StartChoice at the edge (runner.choices)."""
    if requested == StartChoice.cold:
        return StartPlan("cold", {})
    current = current_deps(host, image, accel, libvirt_uri)
    slots, problems, stale = _check_slots(image, vm_pool, current)
    if not problems:
        return StartPlan("warm", slots, spares=tuple(_spares(image, vm_pool, current)))
    fix = f"cu-run image warm {image.name} --slots {vm_pool}" + (" --force" if stale else "")
    if requested == StartChoice.warm:
        raise UsageError(f"cannot start warm on image {image.name}: " + "; ".join(problems), fix=fix)
    return StartPlan("cold", {}, notice=f"starting cold: {problems[0]}"
                     + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "") + f"; to warm: {fix}")


def usable_warm_slots(host: Host, image: Image, accel: Accel, libvirt_uri: str, vm_pool: int) -> dict[int, WarmSlot]:
    """Those of slots 0..VM_POOL-1 whose warm state is there and current: for a pool whose slots
    may each start its own way (an Inspect task's, where a sample waits for no warm state)."""
    return _check_slots(image, vm_pool, current_deps(host, image, accel, libvirt_uri))[0]


def _check_slots(image: Image, vm_pool: int, current) -> tuple[dict[int, WarmSlot], list[str], bool]:
    """The valid warm states of slots 0..VM_POOL-1, what is wrong with the others, and whether
    any of them is stale (not just missing)."""
    slots: dict[int, WarmSlot] = {}
    problems: list[str] = []
    stale = False
    for slot in range(vm_pool):
        found = load_slot(image, slot)
        if found is None:
            problems.append(f"slot {slot} has no warm state")
            continue
        reasons = stale_reasons(found.state.deps, current)
        if reasons:
            problems.append(f"slot {slot}'s warm state is stale: {'; '.join(reasons)}")
            stale = True
            continue
        slots[slot] = found
    return slots, problems, stale


def _spares(image: Image, vm_pool: int, current) -> list[WarmSlot]:
    """IMAGE's valid warm states of the slots past VM_POOL."""
    found = []
    for state in list_slots(image):
        if state.state.slot >= vm_pool and not stale_reasons(state.state.deps, current):
            found.append(state)
    return found
