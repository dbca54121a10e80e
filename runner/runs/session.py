"""One episode VM outside a run: `vm up`, `mcp`, `check`, the Python API's open_vm and the benches
that need a VM of their own. It is the run scope (runner.runs.scope) for one VM, and a VM supply
of one slot (runner.runs.vm_supply): the VM starts as a run's pool of one would start it, and is
torn down however the block ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path

from runner.choices import AccelChoice, StartChoice
from runner.config import Settings
from runner.vm.episode import EpisodeVM
from runner.vm.domain import episode_domain_spec
from runner.hypervisor.domain_xml import SlotIdentity, build_domain_xml
from runner.images.builders import image_named
from runner.images.catalog import Catalog
from runner.interrupts import shielded
from runner.owner import me
from runner.runs.scope import ScopeRequest, new_run_id, open_scope, resolve_accel
from runner.runs.vm_supply import pool_supply

Status = Callable[[str], AbstractContextManager]


@contextmanager
def open_vm(
    settings: Settings,
    image_name: str,
    accel: AccelChoice = AccelChoice.auto,
    *,
    status: Status | None = None,
    notice: Callable[[str], None] | None = None,
    artifacts: Path | None = None,
    run_id: str | None = None,
    start: StartChoice = StartChoice.auto,
) -> Iterator[EpisodeVM]:
    status = status or (lambda _msg: nullcontext())
    with ExitStack() as stack:
        with status(f"checking {image_name}: its golden disk, the accelerator, its warm state"):
            scope = stack.enter_context(open_scope(settings, ScopeRequest(image_name, accel=accel, start=start),
                                                   notice=notice or (lambda _line: None)))
        # A pool of one with no standby: no episode comes after this one to start on it.
        supply = pool_supply(scope.host, settings, scope.pool_config(run_id=run_id or new_run_id(), standby=False),
                             threading.Event(), more_work=lambda: False)
        claim = supply.claim(0, artifacts)
        how = "restoring its warm state" if claim.vm.warm is not None else "a cold boot under TCG takes ~30-60 s"
        with status(f"starting {claim.vm.name} under {scope.accel.upper()} ({how})"):
            try:
                vm = supply.started(claim)
            except BaseException:
                supply.give_back(0, claim.vm, artifacts, torn_down=True)  # a failed start tore itself down
                raise
        try:
            yield vm
        finally:
            # Torn down here, whatever signals arrive meanwhile (runner.interrupts), not in the
            # background: the scope's host closes as the block ends.
            with shielded(lambda: [f"VM {vm.name} and its folder {vm.workdir}"]):
                vm.teardown()
                supply.give_back(0, vm, artifacts, torn_down=True)


def print_dry_run(settings: Settings, image_name: str, accel: AccelChoice) -> str:
    """The domain XML an episode of IMAGE_NAME would get, without starting anything."""
    image = image_named(Catalog(settings.images_dir), image_name)
    chosen, _ = resolve_accel(settings, accel)
    identity = SlotIdentity("dryrun", 0)
    spec = episode_domain_spec(image, identity, settings.episodes_dir / identity.name, chosen,
                               shell_port=0, owner=me(), libvirt_uri=settings.libvirt_uri)
    return build_domain_xml(spec)
