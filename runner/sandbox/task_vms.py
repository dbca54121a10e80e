"""The VMs of one Inspect task's samples on this host: the run scope opened at the task's start,
the slots its samples take, and each sample's episode started in one (warm, or cold when the
warm restore fails).

Admission decides how many slots there are: a sample past them waits for one, whatever
Inspect's --max-sandboxes says (the provider tells the user once when the two differ).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from runner.agents.base import Agent, AgentResult
from runner.choices import AccelChoice, StartChoice
from runner.config import Settings
from runner.vm.episode import EpisodeOptions, EpisodeVM
from runner.errors import InfraError, UsageError
from runner.runs.episode_script import EpisodeScript
from runner.vm.start_plan import usable_warm_slots
from runner.runs.scope import RunScope, ScopeRequest, new_run_id, open_scope
from runner.sandbox.episode import SandboxEpisode
from runner.tasks.model import Suite, Task, load_suite

# Asked of admission, which caps it at what the host's memory holds.
MOST_SLOTS = 64


class CuRunSandboxConfig(BaseModel, frozen=True):
    """What `sandbox=("cu-run", ...)` configures; a plain string there is the image's name."""

    image: str = "linux-test"
    accel: AccelChoice = AccelChoice.auto
    start: StartChoice = StartChoice.auto
    cache_dir: Path | None = None  # cu-run's cache [default: CU_RUN_HOME, else ~/.cache/cu-run]
    libvirt_uri: str | None = None
    artifacts: Path | None = None  # each sample's episode folder goes under it [default: the cache's inspect/]
    live: bool = False  # each sample's VM in cu-run's live view (view only); its URL in connection() and the log


class InspectAgent(Agent):
    """The agent of an Inspect sample: Inspect's solver, which acts through the sandbox, not here."""

    name = "inspect"

    def run(self, vm, task, log, session) -> AgentResult:  # pragma: no cover - never called
        raise AssertionError("an Inspect sample's agent is Inspect's solver")


@dataclass
class TaskVMs:
    settings: Settings
    options: CuRunSandboxConfig
    scope: RunScope
    stack: ExitStack
    warm: dict = field(default_factory=dict)  # slot -> its usable warm state (runner.vm.warm_state.WarmSlot)
    run_id: str = field(default_factory=new_run_id)
    _free: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _suites: dict[str, Suite] = field(default_factory=dict)
    _started: int = 0
    _episodes: dict[int, SandboxEpisode] = field(default_factory=dict)  # slot -> its episode, until ended

    @classmethod
    def open(cls, options: CuRunSandboxConfig, notice: Callable[[str], None]) -> TaskVMs:
        """Checks the image (catalog, golden disk, accelerator, warm states) and opens the host."""
        settings = Settings.resolve(options.cache_dir, options.libvirt_uri)
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
        return cls(settings, options, scope, stack, warm=warm, _free=list(range(scope.vm_pool)))

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
            # A warm slot first: a cold boot is ~13 times slower under TCG.
            slot = min(self._free, key=lambda s: (s not in self.warm, s))
            self._free.remove(slot)
            self._started += 1
            number = self._started
        try:
            ep_dir = self.artifacts / self.run_id / f"{number:04d}-{task.id if task else 'desktop'}"
            ep_dir.mkdir(parents=True, exist_ok=True)
            vm = self._start_vm(slot, ep_dir, notice)
            try:
                script = (EpisodeScript(self.scope.pool_config(run_id=self.run_id, suite_rules=self._suite(metadata).safety),
                                        vm, task, InspectAgent(), ep_dir) if task is not None else None)
                episode = SandboxEpisode(vm, ep_dir, script)
                episode.begin()
                if self.options.live:
                    notice(f"live: {episode.serve_live()} ({vm.name})")
                with self._lock:
                    self._episodes[slot] = episode
            except BaseException:
                vm.capture_artifacts(ep_dir)
                vm.teardown()
                raise
        except BaseException:
            self.give_back(slot)
            raise
        return episode, slot

    def end_episode(self, slot: int, interrupted: bool) -> None:
        """Tears SLOT's episode down (its artifacts kept) and frees the slot, however it goes."""
        with self._lock:
            episode = self._episodes.pop(slot, None)
        try:
            if episode is not None:
                episode.close(interrupted)
        finally:
            self.give_back(slot)

    def give_back(self, slot: int) -> None:
        with self._lock:
            if slot not in self._free:
                self._free.append(slot)

    def close(self) -> None:
        """Ends what episodes are left (a sample whose cleanup never came), then the scope."""
        try:
            for slot in list(self._episodes):
                self.end_episode(slot, interrupted=True)
        finally:
            self.stack.close()

    def _start_vm(self, slot: int, ep_dir: Path, notice: Callable[[str], None]) -> EpisodeVM:
        scope = self.scope
        warm = self.warm.get(slot)

        def started(warm_slot) -> EpisodeVM:
            vm = EpisodeVM(scope.host, scope.image, self.settings, run_id=self.run_id, slot=slot,
                           options=EpisodeOptions(accel=scope.accel), artifacts=ep_dir, warm=warm_slot)
            vm.start()  # a start that fails keeps its artifacts and tears itself down
            return vm

        try:
            return started(warm)
        except InfraError as exc:
            if warm is None or self.options.start == "warm":
                raise
            notice(f"slot {slot}: the warm restore failed ({exc}); booting cold")
            return started(None)

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
        if found.spec.network is not None and not found.guest.carries_network:
            raise UsageError(f"{found.id} has a network:, and its {found.guest.name} guests have no network end yet",
                             fix="docs/network.md says what is built")
        image = self.scope.image
        if found.spec.image and found.spec.image != image.name:
            raise UsageError(f"{found.id} runs on image {found.spec.image}, and this sandbox is {image.name}",
                             fix=f'use sandbox=("cu-run", "{found.spec.image}")')
        return found

    def _suite(self, metadata: dict) -> Suite:
        name = metadata.get("cu_run_suite")
        if not name:
            raise UsageError("a sample that names a cu_run_task must name its cu_run_suite too")
        with self._lock:
            if name not in self._suites:
                self._suites[name] = load_suite(str(name))
            return self._suites[name]
