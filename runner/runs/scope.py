"""The run scope: what every command that starts VMs assembles before its first VM, in one place.

`open_scope` checks the image (its catalog entry and its golden disk's sha256), chooses the
accelerator, opens the host (libvirt), sizes the pool by memory admission, and decides how VMs
start (warm slots and spares, or cold); it closes what it opened on every path. A run, validate,
a study, `tasks select`, `vm up`, `mcp`, `check`, a cluster host's run and every bench use it,
and `pool_config` builds the scheduler's configuration from it, so a spare warm state is capped
by admission and standbys are made only where the pool leaves a core, the same everywhere.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from runner.agents.base import Agent
from runner.choices import AccelChoice, StartChoice
from runner.config import Settings
from runner.hypervisor.accel import AccelProbe, cached_probe, choose_accel, forced_kvm_warning
from runner.hypervisor.domain_xml import Accel
from runner.hypervisor.connect import connect_host
from runner.hypervisor.host import Host
from runner.images.builders import image_named
from runner.images.catalog import Catalog, Image
from runner.vm.episode import EpisodeOptions
from runner.vm.factory import EpisodeVmFactory
from runner.vm.start_plan import StartPlan, plan_start
from runner.vm.warm_state import WarmSlot
from runner.vm.warming import warm_image
from runner.mcp.proxy import ExternalServer
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.network.settings import NetSettings
from runner.profiles import GuestProfile
from runner.vm.admission import Admission, admit, available_mib
from runner.benchmarks.host_scoring import HostScoring
from runner.runs.pool_config import PoolConfig
from runner.runs.episode_inputs import external_server
from runner.runs.request import AgentSetup, HowToRun
from runner.runs.standby import leaves_a_core
from runner.tasks.model import SafetyRule

Notice = Callable[[str], None]


@dataclass(frozen=True)
class ScopeRequest:
    """What a scope is opened for."""

    image: str  # the catalog image
    accel: AccelChoice = AccelChoice.auto
    start: StartChoice = StartChoice.auto  # runner.vm.start_plan
    vm_pool: int = 1  # VMs at once, before admission
    warm_at_first_use: bool = False  # make the slots' missing warm states first (a cluster host)


@dataclass(frozen=True)
class RunScope:
    """The checked image, the accelerator, the host, the admitted pool and how its VMs start."""

    settings: Settings
    image: Image
    accel: Accel
    probe: AccelProbe
    host: Host
    admission: Admission
    start: StartPlan
    notes: tuple[str, ...] = ()  # what the scope decided that a user should hear

    @property
    def profile(self) -> GuestProfile:
        return self.image.manifest.guest

    @property
    def vm_pool(self) -> int:
        return self.admission.admitted

    def vm_factory(self, run_id: str) -> EpisodeVmFactory:
        """How this scope's VMs are made for run RUN_ID: on its host, of its image, under its
        accelerator (runner.vm.factory)."""
        return EpisodeVmFactory(self.host, self.image, self.settings, run_id=run_id,
                                options=EpisodeOptions(accel=self.accel))

    def pool_config(self, *, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS, max_steps: int | None = None,
                    suite_rules: tuple[SafetyRule, ...] = (), record: bool = False,
                    mcp_server: ExternalServer | None = None, standby: bool = True,
                    run_id: str | None = None, host_scoring: HostScoring | None = None,
                    net: NetSettings | None = None) -> PoolConfig:
        """The scheduler's configuration for a pool in this scope. A spare warm state's VM runs
        beside the pool's (a teardown's overlap, a standby), so only as many as the host's memory
        holds besides are used; standbys only where the pool leaves a core."""
        return PoolConfig(image=self.image, accel=self.accel, vm_pool=self.vm_pool, run_id=run_id or new_run_id(),
                          toolsets=toolsets, max_steps=max_steps, warm=self.start.slots,
                          spare_warm=self.start.spares[:self.admission.room_beside],
                          standby=standby and leaves_a_core(self.vm_pool), suite_rules=suite_rules, record=record,
                          mcp_server=mcp_server, host_scoring=host_scoring, net=net or NetSettings())

    def pool_for(self, setup: AgentSetup, how: HowToRun, agent: Agent, suite_rules: tuple[SafetyRule, ...],
                 host_scoring: HostScoring | None = None, *, net: NetSettings) -> PoolConfig:
        """The pool a run gets in this scope, with AGENT (made from SETUP) and its VMs run as HOW says:
        on this machine as on a cluster host. HOST_SCORING: the imported tasks' scoring
        (runner.benchmarks.host_scoring.prepare). NET: the run's network settings
        (runner.runs.episode_inputs.net_settings: the plan's, or a cluster host's own)."""
        return self.pool_config(toolsets=setup.tools, max_steps=setup.max_steps, suite_rules=suite_rules,
                                record=how.record, mcp_server=external_server(setup, agent), standby=how.standby,
                                host_scoring=host_scoring, net=net)

    def provenance(self, requested_accel: str, requested_start: str) -> dict:
        """What run.json records of where the run ran (this machine's part)."""
        return {
            "accel": {"used": self.accel, "requested": requested_accel, "probe": self.probe.reason},
            "start": {"used": self.start.mode, "requested": requested_start, "notice": self.start.notice},
            "hypervisor": {"libvirt_uri": self.settings.libvirt_uri, **self.host.versions()},
            "pool": {"used": self.vm_pool, "per_vm_mib": self.admission.per_vm_mib,
                     "available_mib": self.admission.available_mib},
        }


def new_run_id() -> str:
    return secrets.token_hex(3)


def resolve_accel(settings: Settings, requested: AccelChoice) -> tuple[Accel, AccelProbe]:
    """The accelerator for REQUESTED, and the probe it was chosen on (runner.hypervisor.accel:
    the probe boots its own sector, whatever the image)."""
    probe = cached_probe(settings.cache_dir)
    return choose_accel(requested, probe), probe


def warm_outside_a_run(settings: Settings, host: Host, image: Image, requested: AccelChoice, slots: int, *,
                       admitted: bool, force: bool = False, progress: Callable[[str], None] = print) -> list[WarmSlot]:
    """Warm states for IMAGE made before any run (`cu-run image warm`, a cluster host's warm), for
    the accelerator a run would resolve: SLOTS of them, or with ADMITTED as many of SLOTS as the
    host's memory admits (a cluster host warms what its runs will use)."""
    accel, probe = resolve_accel(settings, requested)
    warning = forced_kvm_warning(requested, probe)
    if warning:
        progress(warning)
    if admitted:
        slots = admit(slots, image.manifest.memory_mib, accel, available_mib()).admitted
    return warm_image(host, settings, image, slots, accel, force=force, progress=progress)


@contextmanager
def open_scope(settings: Settings, request: ScopeRequest, *, notice: Notice = lambda _line: None) -> Iterator[RunScope]:
    """The scope for REQUEST, its notices said through NOTICE; its host connection is closed
    however the block ends."""
    host = connect_host(settings.libvirt_uri)
    try:
        yield make_scope(settings, request, host, notice=notice)
    finally:
        host.close()


def make_scope(settings: Settings, request: ScopeRequest, host: Host, *,
               notice: Notice = lambda _line: None) -> RunScope:
    """The scope for REQUEST on HOST, a connection the caller owns (a cluster host's, long-lived)."""
    image = image_named(Catalog(settings.images_dir), request.image)
    accel, probe = resolve_accel(settings, request.accel)
    admission = admit(request.vm_pool, image.manifest.memory_mib, accel, available_mib())
    notes: list[str] = []
    warning = forced_kvm_warning(request.accel, probe)
    if warning:
        notes.append(warning)
    if admission.capped:
        notes.append(admission.notice(image.name))
    start = _start(settings, request, host, image, accel, admission.admitted, notes)
    if start.notice:
        notes.append(start.notice)
    for line in notes:
        notice(line)
    return RunScope(settings, image, accel, probe, host, admission, start, tuple(notes))


def _start(settings: Settings, request: ScopeRequest, host: Host, image: Image, accel: Accel, slots: int,
           notes: list[str]) -> StartPlan:
    """How the scope's VMs start. The golden disk's sha256 is checked once on every path: by
    warm_image when it warms, here otherwise."""
    if request.warm_at_first_use and request.start != StartChoice.cold:
        try:
            lines: list[str] = []
            warm_image(host, settings, image, slots, accel, progress=lines.append)
            made = [line for line in lines if "warm in" in line]
            if made:
                notes.append(f"made {len(made)} warm states at first use")
        except Exception as exc:  # auto falls back to a cold start, saying why
            if request.start == StartChoice.warm:
                raise
            notes.append(f"starting cold: warming failed: {exc}")
            image.verify_disk()  # warming may have failed on a changed disk: never start cold on it
            return plan_start(StartChoice.cold, host, image, accel, settings.libvirt_uri, slots)
    else:
        image.verify_disk()
    return plan_start(request.start, host, image, accel, settings.libvirt_uri, slots)
