"""The one place an episode VM is made: a factory bound to a host, an image, a run and the
episode's options, called with what differs from one VM to the next (its slot, the warm state
it restores, its episode's folder).

Every front end's VMs come from it. A run's pool, the Inspect sandbox and `vm up`, `mcp` and
`check` get theirs through a VM supply (runner.runs.vm_supply), which decides which VM an
episode gets and calls the factory to make it; warming (runner.vm.warming) and the benches call
it themselves. A test hands the supply a factory of its own, any callable of VmFactory's shape.
`tests/unit/test_vm_factory.py` checks that nothing else constructs an EpisodeVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from typing_extensions import override

from runner.config import Settings
from runner.hypervisor.domain_xml import SlotIdentity
from runner.hypervisor.host import Host
from runner.images.catalog import Image
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.vm.warm_state import SlotLock, WarmSlot


class VmFactory(Protocol):
    def __call__(self, slot: int, *, warm: WarmSlot | None = None, warm_lock: SlotLock | None = None,
                 artifacts: Path | None = None) -> EpisodeVM:
        """An unstarted VM for SLOT: its domain is named for the run and the slot, or for WARM's
        slot when it restores WARM (without WARM it boots cold). WARM_LOCK: WARM's lock, already
        held by the caller; the VM releases it last in its teardown (without one, the VM takes
        it in its start, waiting for whoever holds it). ARTIFACTS: its episode's folder, where a
        failed start leaves what explains it."""
        ...


@dataclass(frozen=True)
class EpisodeVmFactory(VmFactory):
    """VMs of IMAGE on HOST for run RUN_ID, each with its own copy of OPTIONS."""

    host: Host
    image: Image
    settings: Settings
    run_id: str
    options: EpisodeOptions = field(default_factory=EpisodeOptions)

    @override
    def __call__(self, slot: int, *, warm: WarmSlot | None = None, warm_lock: SlotLock | None = None,
                 artifacts: Path | None = None, identity: SlotIdentity | None = None) -> EpisodeVM:
        """IDENTITY: the name, UUID and MAC to boot under instead of the run's slot's (warming
        boots a slot under the name its warm state will be restored into)."""
        return EpisodeVM(self.host, self.image, self.settings, run_id=self.run_id, slot=slot,
                         options=replace(self.options), artifacts=artifacts, warm=warm, warm_lock=warm_lock,
                         identity=identity)
