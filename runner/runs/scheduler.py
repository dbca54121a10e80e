"""The slot scheduler: a run's (task, trial) episodes over a pool of VM slots, and what
happened to each.

Each slot is a worker thread with its own VM at a time (domain cu-<run>-<slot>, or a warm
slot's). The scheduler decides which VM an episode gets (its slot's standby, its own warm
state or a spare, or a cold boot), runs the episode's script on it (runner.runs.episode_script),
retries what broke in the infrastructure on a fresh VM, judges a verifier that gave no verdict
against control episodes, tears VMs down in the background, makes each slot's next VM ready
while its agent works (runner.runs.standby), and drains every teardown when the run ends.
Broken infrastructure is never scored as the agent's failure.
"""

from __future__ import annotations

import json
import logging
import queue
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from runner.mcp.trajectory import append_intervention
from runner.agents.base import Agent
from runner.agents.builtin import NopAgent, OracleAgent
from runner.scoring.blame import blame, describe, judge_check_errors
from runner.config import Settings, private_dir
from runner.episode import EpisodeOptions, EpisodeVM
from runner.errors import InfraError
from runner.hypervisor.host import Host
from runner.runs.results import EpisodeRecord, Outcome, ResultLog, keep_record
from runner.runs.episode_script import EpisodeFault, EpisodeScript, play
from runner.runs.pool_config import PoolConfig
from runner.runs.standby import Standbys
from runner.tasks.model import Task
from runner.images.warm_state import SlotLock, WarmSlot, slot_lock
from runner.workers import STOP_GRACE_S, Workers

log = logging.getLogger(__name__)


@dataclass
class SlotStatus:
    task_id: str = ""
    trial: int = 0
    phase: str = "idle"
    since: float = field(default_factory=time.monotonic)  # when this phase began
    episode_since: float = field(default_factory=time.monotonic)  # when this (task, trial) began on the slot


class SlotScheduler:
    def __init__(self, host: Host, settings: Settings, pool: PoolConfig, agent: Agent, out_dir: Path,
                 on_record: Callable[[EpisodeRecord], None] = lambda _r: None) -> None:
        self.host = host
        self.settings = settings
        self.pool = pool
        self.agent = agent
        self.out_dir = out_dir
        self.log = ResultLog(out_dir)
        self.on_record = on_record
        self.status = {slot: SlotStatus() for slot in range(pool.vm_pool)}
        self._queue: queue.Queue[tuple[Task, int]] = queue.Queue()
        self._stop = threading.Event()
        self._active: dict[int, EpisodeVM] = {}
        self._intervened: set[tuple[str, int]] = set()
        self._teardowns: list[threading.Thread] = []
        self._teardowns_lock = threading.Lock()  # slot workers add to the list while drain() reads it
        self._standbys = Standbys()
        # Verifier-error controls, once per (task, agent) and run: whether the verifier decides.
        self._controls: dict[tuple[str, str], bool | None] = {}
        self._control_locks: dict[tuple[str, str], threading.Lock] = {}
        self._controls_lock = threading.Lock()
        # A slot's last VM whose teardown waits for the next episode's agent to start: tearing
        # it down (QEMU exiting) during that episode's setup would slow the setup on 2 cores.
        self._last_vm: dict[int, tuple[EpisodeVM, Path]] = {}

    def run(self, work: list[tuple[Task, int]], render: Callable[[], None] = lambda: None) -> None:
        """Runs every (task, trial) in WORK over the pool's slots (runner.workers: on Ctrl-C the
        pool stops, every VM is torn down, and the interrupt is re-raised); then drains."""
        for item in work:
            self._queue.put(item)
        self.workers().run(range(min(self.pool.vm_pool, len(work))), render)
        self.drain()

    def workers(self) -> Workers[int, tuple[Task, int]]:
        """The worker loop over this pool's slots, each taking from the run's own queue."""
        def take(_slot: int) -> tuple[Task, int] | None:
            try:
                return self._queue.get_nowait()
            except queue.Empty:
                return None

        def do(slot: int, item: tuple[Task, int]) -> None:
            record = self.run_one(slot, *item)
            if record is not None:
                self.keep(record)

        return Workers(take, do, stop_work=self.stop, still_there=self.still_there, drain=self.drain,
                       worker_ended=self.slot_ended, name=lambda slot: f"slot-{slot}", stopping=self._stop)

    def slot_ended(self, slot: int) -> None:
        """SLOT has no more work: its standby and its last VM go."""
        self._standbys.discard(slot)
        self._tear_down_last(slot)
        self.status[slot] = SlotStatus()

    def still_there(self) -> list[str]:
        """What this pool has not torn down yet: its VMs, those being torn down, its standbys."""
        left = [f"VM {vm.name}" for vm in self._active.values()]
        left += [f"VM {vm.name}" for vm, _dir in list(self._last_vm.values())]
        with self._teardowns_lock:
            left += [t.name.replace("teardown-", "VM ", 1) + " (being torn down)" for t in self._teardowns if t.is_alive()]
        left += [f"standby VM {name}" for name in self._standbys.names()]
        return left

    def drain(self, timeout: float = STOP_GRACE_S) -> None:
        """Waits for the teardowns still running in the background: nothing is left behind."""
        deadline = time.monotonic() + timeout
        self._standbys.discard_all()
        for slot in list(self._last_vm):
            self._tear_down_last(slot)
        with self._teardowns_lock:
            pending = list(self._teardowns)
        for thread in pending:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._teardowns_lock:
            self._teardowns = [t for t in self._teardowns if t.is_alive()]

    def stop(self) -> None:
        """Ends the run: no new episodes, and the VMs in flight are killed so blocked calls return."""
        self._stop.set()
        self._standbys.destroy_all(self.host.destroy)
        for vm in [*self._active.values(), *(last for last, _dir in list(self._last_vm.values()))]:
            try:
                self.host.destroy(vm.name)
            except InfraError:
                pass

    # -- one slot

    def run_one(self, slot: int, task: Task, trial: int) -> EpisodeRecord | None:
        """One (task, trial) on SLOT, infra errors retried on a fresh VM: its record, which is not
        written to the results (the caller keeps it), or None when the run was stopped first."""
        try:
            record = self._with_retries(slot, task, trial)
            if record is not None and record.outcome == "verifier_error":
                record = self._judge_verifier_error(slot, task, record)
            if record is not None and record.check_errors and not isinstance(self.agent, NopAgent):
                record = self._judge_check_errors(slot, task, record)
        except Exception as exc:  # noqa: BLE001 - an episode is never lost: it is recorded
            record = self._runner_failure(slot, task, trial, exc)
        finally:
            self.status[slot] = SlotStatus()
        if record is not None and (task.id, trial) in self._intervened:
            record = replace(record, intervened=True)
        return record

    def _with_retries(self, slot: int, task: Task, trial: int, control: Agent | None = None) -> EpisodeRecord | None:
        """CONTROL: an episode of that agent instead of the run's, in a folder of its own beside
        the trial's (runner.runs.harness._judge_verifier_error)."""
        started = datetime.now(UTC)
        t0 = time.monotonic()
        attempts = self.pool.infra_retries + 1
        ep_dir = self.episode_dir(task, trial) if control is None else self._control_dir(task, control)
        for attempt in range(1, attempts + 1):
            try:
                if control is None:
                    return self._episode(slot, task, trial, attempt, started)
                return self._episode(slot, task, trial, attempt, started, agent=control, ep_dir=ep_dir)
            except Exception as exc:  # noqa: BLE001 - whose fault it is decides what happens next
                if self._stop.is_set():
                    return None  # the run is ending: this episode stays unfinished, --resume redoes it
                fault = exc if isinstance(exc, EpisodeFault) else EpisodeFault(exc, "before_agent", None)
                verdict = blame(fault.error, fault.stage, fault.host_fault)
                self._keep_traceback(ep_dir, fault.error)
                if not verdict.retry:
                    return self._record(task, trial, verdict.outcome, verdict.reason, t0, slot, attempt, started)
                self._keep_failed_attempt(ep_dir, attempt, verdict.reason)
                if attempt == attempts:
                    return self._record(task, trial, "infra_error", f"after {attempts} attempts: {verdict.reason}",
                                        t0, slot, attempt, started)
        return None

    def _episode(self, slot: int, task: Task, trial: int, attempt: int, started: datetime, *,
                 agent: Agent | None = None, ep_dir: Path | None = None) -> EpisodeRecord:
        agent = agent or self.agent
        ep_dir = ep_dir or self.episode_dir(task, trial)
        shutil.rmtree(ep_dir, ignore_errors=True)
        private_dir(ep_dir.parent)
        ep_dir.mkdir(mode=0o700)
        t0 = time.monotonic()
        phases: dict[str, float] = {}
        if self._standbys.has(slot):
            self._set(slot, task, trial, "standby")
        vm, waited = self._standbys.take(slot, self._stop)
        if vm is not None:
            vm.artifacts = ep_dir
            # Made before this episode began: its start is not part of this episode's time.
            phases.update({f"standby_{k}": v for k, v in vm.timings.phases.items()})
            phases["standby_wait"] = round(waited, 3)
        else:
            self._tear_down_last(slot)  # it may hold the warm state this start needs
            warm, warm_lock = self._claim_warm(slot)
            self._set(slot, task, trial, "restore" if warm else "boot")
            vm = self._new_vm(slot, warm, warm_lock, artifacts=ep_dir)
            self._wait_for_teardown_of(vm.name)
        self._active[slot] = vm
        script = EpisodeScript(self.pool, vm, task, agent, ep_dir, set_phase=lambda phase: self._set(slot, task, trial, phase),
                               at_agent_start=lambda: self._agent_starts(slot))
        script.state.phases.update(phases)
        try:
            try:
                scored = play(vm, script, stopped=self._stop.is_set)
            finally:
                self._tear_down_last(slot)  # when the agent never started
            if self._standbys.has(slot):
                self._last_vm[slot] = (vm, ep_dir)  # the next episode starts on the standby
            else:
                self._teardown_later(vm, ep_dir)
        finally:
            self._active.pop(slot, None)
        state = script.state
        record = EpisodeRecord(task.id, trial, scored.outcome, scored.reason, round(time.monotonic() - t0, 2), slot,
                               attempt, started.isoformat(), datetime.now(UTC).isoformat(), state.phases,
                               checkpoints=scored.checkpoints, violations=[v.as_dict() for v in scored.violations],
                               changed=[str(c) for c in scored.changed], check_errors=scored.check_errors)
        (ep_dir / "episode.json").write_text(json.dumps(
            {**asdict(record), "agent": agent.name, "agent_ended": scored.agent.ended,
             "agent_reason": scored.agent.reason, "verifier": scored.verifier, "domain": vm.name}, indent=2) + "\n")
        return record

    # -- a verifier that gives no verdict

    def _judge_verifier_error(self, slot: int, task: Task, record: EpisodeRecord) -> EpisodeRecord:
        """A verifier error is the task's defect only when the verifier also errs without the
        agent: on the untouched state (a nop control episode) or on the oracle's. Otherwise the
        agent's state made it err (a huge file where it reads, a slow ~/.profile, a wedged
        display), and that counts against the agent: a fail. Each control runs once per task
        and run, on a fresh VM of the slot."""
        if isinstance(self.agent, NopAgent):
            return record  # its state is the untouched one: the error is the task's
        # The run's own agent being the oracle, its state is the oracle's: only nop is left to ask.
        has_oracle = task.script("oracle") is not None  # an imported task may have none
        controls = (NopAgent(),) if isinstance(self.agent, OracleAgent) or not has_oracle else (NopAgent(), OracleAgent())
        for control in controls:
            decided = self._control(slot, task, control)
            if decided is None:
                return replace(record, reason=f"{record.reason} (the {control.name} control episode did not "
                                              "finish, so a task defect cannot be ruled out)")
            if not decided:
                return replace(record, reason=f"{record.reason} (a task defect: the verifier also gives no "
                                              f"verdict with the {control.name} agent)")
        asked = " and ".join(f"the {c.name} agent's" for c in controls)
        return replace(record, outcome="fail",
                       reason=f"the verifier gave no verdict on the agent's state ({record.reason}), though it "
                              f"gives one on {asked}: the agent's doing")

    def _judge_check_errors(self, slot: int, task: Task, record: EpisodeRecord) -> EpisodeRecord:
        """Checkpoints and safety checks that gave no answer, judged against the nop control as the
        verifier is (scoring.blame.judge_check_errors), with the same control episode."""
        control_errors = None
        if self._control(slot, task, NopAgent()) is not None:
            try:
                control = json.loads((self._control_dir(task, NopAgent()) / "episode.json").read_text())
                control_errors = [str(e) for e in control.get("check_errors", [])]
            except (OSError, ValueError, AttributeError):
                control_errors = None
        judged = judge_check_errors(record.check_errors, control_errors)
        return replace(record, violations=record.violations + judged.violations, check_errors=judged.check_errors)

    def _control(self, slot: int, task: Task, agent: Agent) -> bool | None:
        """Whether TASK's verifier gives a verdict after AGENT (nop: the untouched state; the oracle's):
        True or False, or None when the control episode could not get that far."""
        key = (task.id, agent.name)
        with self._controls_lock:
            lock = self._control_locks.setdefault(key, threading.Lock())
        with lock:  # two slots that need the same control run it once
            if key not in self._controls:
                self._with_retries(slot, task, 0, control=agent)
                try:
                    verifier = json.loads((self._control_dir(task, agent) / "episode.json").read_text())["verifier"]
                    self._controls[key] = verifier["verdict"] != "error"
                except (OSError, ValueError, KeyError, TypeError):
                    self._controls[key] = None  # the control never reached its verifier
            return self._controls[key]

    def _control_dir(self, task: Task, agent: Agent) -> Path:
        return self.out_dir / task.id / f"control-{agent.name}"

    # -- bookkeeping

    def episode_dir(self, task: Task, trial: int) -> Path:
        return self.episode_dir_of(task.id, trial)

    def episode_dir_of(self, task_id: str, trial: int) -> Path:
        return self.out_dir / task_id / str(trial)

    def _record(self, task: Task, trial: int, outcome: Outcome, reason: str, t0: float, slot: int, attempt: int,
                started: datetime) -> EpisodeRecord:
        """The record of an episode that ended without a verdict."""
        return EpisodeRecord(task.id, trial, outcome, reason, round(time.monotonic() - t0, 2), slot, attempt,
                             started.isoformat(), datetime.now(UTC).isoformat())

    def keep(self, record: EpisodeRecord) -> None:
        keep_record(self.log, record, self.on_record)

    def _runner_failure(self, slot: int, task: Task, trial: int, exc: Exception) -> EpisodeRecord:
        """What an exception nobody expected comes to: a recorded infra error, its traceback kept."""
        log.error("slot %d: %s trial %d: the runner failed: %s", slot, task.id, trial, describe(exc))
        try:
            self._keep_traceback(self.episode_dir(task, trial), exc)
        except OSError:
            pass
        return self._record(task, trial, "infra_error", f"the runner failed: {describe(exc)}", time.monotonic(),
                            slot, 0, datetime.now(UTC))

    @staticmethod
    def _keep_traceback(ep_dir: Path, exc: BaseException) -> None:
        ep_dir.mkdir(parents=True, exist_ok=True)
        (ep_dir / "runner-error.txt").write_text("".join(traceback.format_exception(exc)))

    @staticmethod
    def _keep_failed_attempt(ep_dir: Path, attempt: int, reason: str) -> None:
        if not ep_dir.exists():
            return
        (ep_dir / "infra_error.txt").write_text(reason + "\n")
        kept = ep_dir.with_name(f"{ep_dir.name}.infra-attempt-{attempt}")
        shutil.rmtree(kept, ignore_errors=True)
        ep_dir.rename(kept)

    def _set(self, slot: int, task: Task, trial: int, phase: str) -> None:
        now = self.status.get(slot)
        since = now.episode_since if now is not None and (now.task_id, now.trial) == (task.id, trial) else time.monotonic()
        self.status[slot] = SlotStatus(task.id, trial, phase, episode_since=since)

    # -- warm slots and teardown

    def _claim_warm(self, slot: int) -> tuple[WarmSlot | None, SlotLock | None]:
        """The warm state SLOT restores, already held, and its lock: the slot's own when it is
        free, else a spare (the own one is still being torn down). With none free, (own, None):
        the episode waits for its own slot as before."""
        return self._free_warm(slot) or (self.pool.warm.get(slot), None)

    def _free_warm(self, slot: int) -> tuple[WarmSlot, SlotLock] | None:
        """SLOT's own warm state or a spare, whichever is free first, held; None when none is
        (or the pool has no spares, when the own one is the only choice)."""
        own = self.pool.warm.get(slot)
        if own is None or not self.pool.spare_warm:
            return None
        for candidate in (own, *self.pool.spare_warm):
            lock = slot_lock(self.pool.image, candidate.state.slot)
            if lock.try_acquire():
                return candidate, lock
        return None

    def _agent_starts(self, slot: int) -> None:
        """The slot's work that waits for an agent to begin: it then shares the cores with the
        agent, not with the episode's own admin commands."""
        freeing = self._tear_down_last(slot)
        self._prepare_standby(slot, after=freeing)

    def _tear_down_last(self, slot: int) -> threading.Thread | None:
        """Starts tearing down SLOT's last VM, if it still waits for that: the teardown's thread."""
        last = self._last_vm.pop(slot, None)
        return None if last is None else self._teardown_later(*last)

    def _prepare_standby(self, slot: int, after: threading.Thread | None = None) -> None:
        """Makes SLOT's next VM ready in the background, while this episode runs, when there is
        more work and a warm state free for it, or freed by AFTER, the last VM's teardown
        (runner.runs.standby): then every episode after a slot's first starts on a standby."""
        if not self.pool.standby or self._queue.empty() or self._stop.is_set():
            return

        def make() -> EpisodeVM | None:
            free = self._free_warm(slot)
            if free is None:
                return None
            return self._new_vm(slot, *free)

        self._standbys.prepare(slot, make, after=after)

    def _new_vm(self, slot: int, warm: WarmSlot | None, warm_lock: SlotLock | None,
                artifacts: Path | None = None) -> EpisodeVM:
        """An (unstarted) VM of this pool's for SLOT; ARTIFACTS: its episode's folder, once known."""
        return EpisodeVM(self.host, self.pool.image, self.settings, run_id=self.pool.run_id, slot=slot,
                         options=EpisodeOptions(accel=self.pool.accel), artifacts=artifacts, warm=warm,
                         warm_lock=warm_lock)

    def _wait_for_teardown_of(self, name: str) -> None:
        """Until the last VM named NAME is torn down. A cold VM boots under its slot's fixed name
        and folder, so the slot's last one must be gone first: its teardown destroys by name and
        removes that folder, and would take the new VM with it. (A warm one is already ordered
        after that teardown by its slot's lock, which a teardown releases last: the wait adds
        nothing for it.)"""
        with self._teardowns_lock:
            pending = [t for t in self._teardowns if t.name == f"teardown-{name}"]
        for thread in pending:
            thread.join()

    def _teardown_later(self, vm: EpisodeVM, ep_dir: Path) -> threading.Thread:
        """Tears VM down in the background, so the slot's next episode need not wait for it. A
        teardown that fails is logged and noted in the episode folder; gc collects what it left."""
        def teardown() -> None:
            failed = vm.teardown()
            if failed:
                try:
                    (ep_dir / "teardown-error.txt").write_text("\n".join(failed) + "\n")
                except OSError:
                    pass

        thread = threading.Thread(target=teardown, name=f"teardown-{vm.name}", daemon=True)
        with self._teardowns_lock:
            self._teardowns = [t for t in self._teardowns if t.is_alive()] + [thread]
        thread.start()
        return thread

    # -- what the live view asks (runner.live)

    def active_vm(self, slot: int) -> EpisodeVM | None:
        """The VM the slot runs now, or None between episodes."""
        return self._active.get(slot)

    def intervene(self, slot: int, entry: dict) -> None:
        """A person's input to SLOT's screen (live view, --live-control): a line of the episode's
        trajectory, marked as a human intervention, and the episode marked intervened."""
        status = self.status.get(slot)
        if status is None or not status.task_id:
            return
        self._intervened.add((status.task_id, status.trial))
        append_intervention(self.episode_dir_of(status.task_id, status.trial) / "trajectory.jsonl", entry, status.phase)

