"""The VMs of one Inspect task's samples on this host: the run scope opened at the task's start,
and a VM supply over its slots (runner.runs.vm_supply), from which each sample claims a VM and to
which it gives the VM back, as a run's episode does.

The supply starts them as a run's pool does: its own warm state or a cold boot. Where the sandbox
differs, it is one of the supply's options, set in `open` below with why: each slot starts its own
way, a sample takes a free slot (a warm one first), no standbys, and a warm start that fails is
tried once more cold. One difference is not an option: a sample's VM is torn down in its cleanup
(end_episode), not in the background as a run's is.

Admission decides how many slots there are: a sample past them waits for one, whatever
Inspect's --max-sandboxes says (the provider tells the user once when the two differ).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel
from typing_extensions import override

from runner.agents.base import Agent, AgentResult
from runner.assets import assets_root
from runner.choices import AccelChoice, NetMode, StartChoice
from runner.config import Settings
from runner.errors import UsageError
from runner.network.settings import NetHosts, NetSettings
from runner.records.cassettes import RECORDING
from runner.runs.episode_network import replay_cassette
from runner.runs.episode_script import EpisodeScript
from runner.runs.run import write_json
from runner.runs.vm_supply import SupplyOptions, VmSupply
from runner.vm.start_plan import usable_warm_slots
from runner.runs.scope import RunScope, ScopeRequest, new_run_id, open_scope
from runner.sandbox.episode import SandboxEpisode
from runner.tasks.guest_parts import require_parts
from runner.tasks.model import Suite, Task, load_suite

# Asked of admission, which caps it at what the host's memory holds.
MOST_SLOTS = 64


class CuRunSandboxConfig(BaseModel, frozen=True, extra="forbid"):
    """What `sandbox=("cu-run", ...)` configures; a plain string there is the image's name."""

    image: str = "linux-test"
    accel: AccelChoice = AccelChoice.auto
    start: StartChoice = StartChoice.auto
    cache_dir: Path | None = None  # cu-run's cache [default: CU_RUN_HOME, else ~/.cache/cu-run]
    libvirt_uri: str | None = None
    artifacts: Path | None = None  # each sample's episode folder goes under it [default: the cache's inspect/]
    live: bool = False  # each sample's VM in cu-run's live view (view only); its URL in connection() and the log
    # A networked task's proxy, as `cu-run run --net`: live, record (each sample's answers to its
    # episode's cassette.jsonl; keep them with `cu-run assets cassettes`), or replay (the task's
    # cassette alone); the asset store its sha256: cassettes are kept in; --net-hosts' file.
    net: NetMode = NetMode.live
    assets: Path | None = None
    net_hosts: Path | None = None


class InspectAgent(Agent):
    """The agent of an Inspect sample: Inspect's solver, which acts through the sandbox, not here."""

    name = "inspect"

    @override
    def run(self, vm, task, log, session) -> AgentResult:  # pragma: no cover - never called
        raise AssertionError("an Inspect sample's agent is Inspect's solver")


@dataclass
class TaskVMs:
    settings: Settings
    options: CuRunSandboxConfig
    scope: RunScope
    stack: ExitStack
    supply: VmSupply
    run_id: str
    net: NetSettings = field(default_factory=NetSettings)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _suites: dict[str, Suite] = field(default_factory=dict)
    _started: int = 0
    _episodes: dict[int, SandboxEpisode] = field(default_factory=dict)  # slot -> its episode, until ended

    @classmethod
    def open(cls, options: CuRunSandboxConfig, notice: Callable[[str], None]) -> TaskVMs:
        """Checks the image (catalog, golden disk, accelerator, warm states) and opens the host."""
        settings = Settings.resolve(options.cache_dir, options.libvirt_uri)
        net = NetSettings(options.net, assets_root(options.assets),
                          NetHosts.load(options.net_hosts) if options.net_hosts is not None else None)
        stack = ExitStack()
        try:
            # Opened cold (the golden disk checked); then each slot starts warm where its state is
            # usable, where a run's pool starts all warm or all cold.
            scope = stack.enter_context(open_scope(
                settings, ScopeRequest(options.image, accel=options.accel, start=StartChoice.cold, vm_pool=MOST_SLOTS),
                notice=lambda line: None if "capped" in line else notice(line)))
            warm = {} if options.start == "cold" else usable_warm_slots(
                scope.host, scope.image, scope.accel, settings.libvirt_uri, scope.vm_pool)
            if options.start == "warm" and not warm:
                raise UsageError(f"image {options.image} has no usable warm state for start=warm",
                                 fix=f"cu-run image warm {options.image} --slots 2")
            if options.start == "auto" and not warm:
                notice(f"{options.image} has no usable warm state: every sample boots cold (~45 s under TCG); "
                       f"to warm: cu-run image warm {options.image} --slots 2")
        except BaseException:
            stack.close()
            raise
        run_id = new_run_id()
        # What differs from a run's pool, and why:
        # - warm: per slot (above), so the slots a user warmed start warm whatever the rest;
        # - no spares: the slots are as many as the host's memory holds, so none fits beside them;
        # - no standby: a sandbox does not know whether another sample comes to start on it;
        # - cold_after_failed_restore: a sample's start is not retried as a run's is (an infra
        #   error gets a fresh VM there), so a warm state that fails costs a cold boot, not the sample.
        supply = VmSupply(scope.vm_factory(run_id), SupplyOptions(
            slots=scope.vm_pool, warm=warm, standby=False, cold_after_failed_restore=options.start != "warm"))
        if options.net == NetMode.record:
            folder = (options.artifacts or settings.cache_dir / "inspect") / run_id
            notice(f"recording each networked sample's answers in {folder}; keep them for the suite with: "
                   f"cu-run assets cassettes {folder} --assets DIR")
        return cls(settings, options, scope, stack, supply, run_id, net)

    @property
    def slots(self) -> int:
        return self.scope.vm_pool

    @property
    def artifacts(self) -> Path:
        return self.options.artifacts or self.settings.cache_dir / "inspect"

    def start_episode(self, metadata: dict, notice: Callable[[str], None]) -> tuple[SandboxEpisode, int]:
        """A started VM in a free slot (the caller holds one of `slots` places), and the cu-run task
        METADATA names set up on it; returns the episode and its slot."""
        task = self._task(metadata)
        with self._lock:
            self._started += 1
            number = self._started
        if task is not None and task.spec.network is not None and self.net.mode == NetMode.record:
            self._recorded(metadata, task)
        # TASK/NNNN, as a run's TASK/TRIAL: `cu-run assets cassettes` reads a recording's so.
        ep_dir = self.artifacts / self.run_id / (task.id if task else "desktop") / f"{number:04d}"
        ep_dir.mkdir(parents=True, exist_ok=True)
        claim = self.supply.claim_free(ep_dir)
        try:
            vm = self.supply.started(claim, notice)  # a start that fails keeps its artifacts and tears itself down
            try:
                script = None  # a bare desktop: no task, no suite
                if task is not None:
                    config = self.scope.pool_config(run_id=self.run_id, suite_rules=self._suite(metadata).safety,
                                                    net=self.net)
                    script = EpisodeScript(config, vm, task, InspectAgent(), ep_dir)
                episode = SandboxEpisode(vm, ep_dir, script)
                episode.begin()
                if self.options.live:
                    notice(f"live: {episode.serve_live()} ({vm.name})")
                with self._lock:
                    self._episodes[claim.slot] = episode
            except BaseException:
                vm.capture_artifacts(ep_dir)
                vm.teardown()
                raise
        except BaseException:
            self.supply.give_back(claim.slot, claim.vm, ep_dir, torn_down=True)
            raise
        self.supply.agent_started(claim.slot)  # Inspect's solver is the agent, and it starts now
        return episode, claim.slot

    def end_episode(self, slot: int, interrupted: bool) -> None:
        """Ends SLOT's episode (its artifacts kept) and gives its VM back torn down, however it
        goes. At once, not in the background as a run's: Inspect's process may end after its last
        sample's cleanup, and a background teardown then died half done (`inspect eval` of the
        example left both slots' folders behind)."""
        with self._lock:
            episode = self._episodes.pop(slot, None)
        if episode is None:
            return
        try:
            episode.finish()
        finally:
            episode.vm.teardown(interrupted=interrupted)
            self.supply.give_back(slot, episode.vm, episode.ep_dir, torn_down=True)

    def close(self) -> None:
        """Ends what episodes are left (a sample whose cleanup never came), waits for every VM's
        teardown, then closes the scope."""
        try:
            try:
                for slot in list(self._episodes):
                    self.end_episode(slot, interrupted=True)
            finally:
                self.supply.drain()
        finally:
            self.stack.close()

    def _task(self, metadata: dict) -> Task | None:
        """The cu-run task a sample's metadata names (cu_run_suite, cu_run_task), or None."""
        task_id = metadata.get("cu_run_task")
        if task_id is None:
            return None
        suite = self._suite(metadata)
        found = {t.id: t for t in suite.tasks}.get(str(task_id))
        if found is None:
            raise UsageError(f"suite {suite.name} has no task {task_id!r}",
                             fix=f"cu-run tasks list --suite {suite.folder} lists its tasks")
        if found.spec.scoring == "host":
            raise UsageError(f"{found.id} is an imported task scored on the host; the Inspect scorer runs guest "
                             "verifiers only", fix="run imported suites with cu-run run")
        require_parts([found], suite.safety)
        if found.spec.network is not None and self.net.mode == NetMode.replay:
            replay_cassette(found, self.net.assets)  # a cassette missing or unreadable: said before any VM
        image = self.scope.image
        if found.spec.profile != image.manifest.profile:
            raise UsageError(f"{found.id} is a task for {found.spec.profile} guests, and this sandbox's image "
                             f"{image.name} is {image.manifest.profile}", fix="use a sandbox of an image of the task's profile")
        if found.spec.image and found.spec.image != image.name:
            raise UsageError(f"{found.id} runs on image {found.spec.image}, and this sandbox is {image.name}",
                             fix=f'use sandbox=("cu-run", "{found.spec.image}")')
        return found

    def _recorded(self, metadata: dict, task: Task) -> None:
        """The run folder's RECORDING with TASK among its tasks: what keep_cassettes reads."""
        path = self.artifacts / self.run_id / RECORDING
        suite = str(self._suite(metadata).folder.resolve())
        with self._lock:
            said = json.loads(path.read_text()) if path.is_file() else {"suite": suite, "tasks": []}
            if said["suite"] != suite:
                raise UsageError(f"this sandbox records {said['suite']}'s tasks; {task.id} is of {suite}",
                                 fix="record one suite per Inspect task")
            tasks: list[str] = list(said["tasks"])
            if task.id not in tasks:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json(path, {"suite": suite, "tasks": [*tasks, task.id]})  # whole or not at all

    def _suite(self, metadata: dict) -> Suite:
        name = metadata.get("cu_run_suite")
        if not name:
            raise UsageError("a sample that names a cu_run_task must name its cu_run_suite too")
        with self._lock:
            if name not in self._suites:
                self._suites[name] = load_suite(str(name))
            return self._suites[name]
