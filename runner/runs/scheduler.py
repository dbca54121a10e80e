"""The slot scheduler: a run's (task, trial) episodes over a pool of VM slots, and what
happened to each.

Each slot is a worker of the one worker loop (runner.workers) with its own VM at a time. Which
VM an episode gets, and what becomes of it after, is the pool's VM supply
(runner.runs.vm_supply: standbys, warm states and spares, cold boots, background teardown).
The scheduler decides what an episode comes to: it runs the episode's script on its VM
(runner.runs.episode_script), retries what broke in the infrastructure on a fresh VM, judges a
verifier or a check that gave no verdict against control episodes, and keeps every record.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.mcp.trajectory import append_intervention
from runner.agents.base import Agent
from runner.agents.builtin import NopAgent, OracleAgent
from runner.scoring.blame import blame, describe, judge_check_errors
from runner.config import Settings, private_dir
from runner.hypervisor.host import Host
from runner.records.results import EpisodeRecord, Outcome, ResultLog, keep_record
from runner.runs.episode_script import EpisodeFault, EpisodeScript, play
from runner.runs.pool import Episode
from runner.runs.pool_config import PoolConfig
from runner.tasks.model import Task
from runner.runs.vm_supply import VmSupply, pool_supply
from runner.vm.episode import EpisodeVM
from runner.workers import STOP_GRACE_S, Workers, taking_from

log = logging.getLogger(__name__)

# One attempt of an episode: (slot, task, trial, attempt, started, agent, its folder) -> its record.
Attempt = Callable[[int, Task, int, int, datetime, Agent, Path], EpisodeRecord]


@dataclass
class SlotStatus:
    task_id: str = ""
    trial: int = 0
    phase: str = "idle"
    since: float = field(default_factory=time.monotonic)  # when this phase began
    episode_since: float = field(default_factory=time.monotonic)  # when this (task, trial) began on the slot


class SlotScheduler:
    def __init__(self, host: Host, settings: Settings, pool: PoolConfig, agent: Agent, out_dir: Path,
                 on_record: Callable[[EpisodeRecord], None] = lambda _r: None, *,
                 vms: VmSupply | None = None, stopping: threading.Event | None = None,
                 attempt: Attempt | None = None) -> None:
        """VMS and STOPPING: a VM supply and a stop shared with other schedulers on the same slots
        (a study's arms, runner.runs.local_pool); by default the scheduler's own. ATTEMPT: how one
        attempt of an episode runs (default: on a VM of the supply, with the episode's script); a
        test gives its own to plant faults at that seam."""
        self.host = host
        self.settings = settings
        self.pool = pool
        self.agent = agent
        self.out_dir = out_dir
        self.log = ResultLog(out_dir)
        self.on_record = on_record
        self.status = {slot: SlotStatus() for slot in range(pool.vm_pool)}
        self._queue: queue.SimpleQueue[Episode] = queue.SimpleQueue()
        self._stop = stopping or threading.Event()
        self.vms = vms or pool_supply(host, settings, pool, self._stop, more_work=lambda: not self._queue.empty())
        self._attempt = attempt or self._attempt_on_a_vm
        self._intervened: set[tuple[str, int]] = set()
        # Verifier-error controls, once per (task, agent) and run: whether the verifier decides.
        self._controls: dict[tuple[str, str], bool | None] = {}
        self._control_locks: dict[tuple[str, str], threading.Lock] = {}
        self._controls_lock = threading.Lock()

    def run(self, work: list[tuple[Task, int]], render: Callable[[], None] = lambda: None) -> None:
        """Runs every (task, trial) in WORK over the pool's slots (run_on_slots); then drains."""
        for task, trial in work:
            self._queue.put((0, task, trial))
        run_on_slots([self], self.vms, self._stop, self._queue, min(self.pool.vm_pool, len(work)), render)

    def slot_ended(self, slot: int) -> None:
        """SLOT has no more work here."""
        self.status[slot] = SlotStatus()

    def still_there(self) -> list[str]:
        """What this pool has not torn down yet (runner.runs.vm_supply)."""
        return self.vms.still_there()

    def drain(self, timeout: float = STOP_GRACE_S) -> None:
        """Waits for the teardowns still running in the background: nothing is left behind."""
        self.vms.drain(timeout)

    def stop(self) -> None:
        """Ends the run: no new episodes, and the VMs in flight are killed so blocked calls return."""
        self._stop.set()
        self.vms.stop()

    @property
    def stopping(self) -> threading.Event:
        return self._stop

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
        the trial's (_judge_verifier_error below)."""
        started = datetime.now(UTC)
        t0 = time.monotonic()
        attempts = self.pool.infra_retries + 1
        ep_dir = self.episode_dir(task, trial) if control is None else self._control_dir(task, control)
        for attempt in range(1, attempts + 1):
            try:
                return self._attempt(slot, task, trial, attempt, started, control or self.agent, ep_dir)
            except Exception as exc:  # noqa: BLE001 - whose fault it is decides what happens next
                if self._stop.is_set():
                    return None  # the run is ending: this episode stays unfinished, --resume redoes it
                fault = exc if isinstance(exc, EpisodeFault) else EpisodeFault(exc, "before_agent", None)
                verdict = blame(fault.error, fault.stage, fault.host_fault)
                self._keep_traceback(ep_dir, fault.error)
                if not verdict.retry:
                    return replace(self._record(task, trial, verdict.outcome, verdict.reason, t0, slot, attempt, started),
                                   violations=[v.as_dict() for v in fault.violations])
                self._keep_failed_attempt(ep_dir, attempt, verdict.reason)
                if attempt == attempts:
                    return self._record(task, trial, "infra_error", f"after {attempts} attempts: {verdict.reason}",
                                        t0, slot, attempt, started)
        return None

    def _attempt_on_a_vm(self, slot: int, task: Task, trial: int, attempt: int, started: datetime, agent: Agent,
                         ep_dir: Path) -> EpisodeRecord:
        """One attempt of an episode: a VM claimed from the supply, the episode's script played on
        it, the VM given back, and what it came to."""
        shutil.rmtree(ep_dir, ignore_errors=True)
        private_dir(ep_dir.parent)
        ep_dir.mkdir(mode=0o700)
        t0 = time.monotonic()
        claim = self.vms.claim(slot, ep_dir, phase=lambda phase: self._set(slot, task, trial, phase))
        vm = claim.vm
        script = EpisodeScript(self.pool, vm, task, agent, ep_dir, set_phase=lambda phase: self._set(slot, task, trial, phase),
                               at_agent_start=lambda: self.vms.agent_started(slot))
        script.state.phases.update(claim.phases)
        torn_down = True  # play tears down a VM whose episode failed
        try:
            scored = play(vm, script, stopped=self._stop.is_set)
            torn_down = False
        finally:
            self.vms.give_back(slot, vm, ep_dir, torn_down=torn_down)
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

    # -- what the live view asks (runner.live)

    def statuses(self) -> dict[int, SlotStatus]:
        """What each slot does now."""
        return dict(self.status)

    def active_vm(self, slot: int) -> EpisodeVM | None:
        """The VM the slot runs now, or None between episodes."""
        return self.vms.active(slot)

    def intervene(self, slot: int, entry: dict[str, Any]) -> None:
        """A person's input to SLOT's screen (live view, --live-control): a line of the episode's
        trajectory, marked as a human intervention, and the episode marked intervened."""
        status = self.status.get(slot)
        if status is None or not status.task_id:
            return
        self._intervened.add((status.task_id, status.trial))
        append_intervention(self.episode_dir_of(status.task_id, status.trial) / "trajectory.jsonl", entry, status.phase)


def run_on_slots(schedulers: Sequence[SlotScheduler], vms: VmSupply, stopping: threading.Event,
                 work: queue.SimpleQueue[Episode], slots: int, render: Callable[[], None] = lambda: None) -> None:
    """Every episode of WORK, each run by its scheduler, over SLOTS slots that share one VM
    supply: a run's one scheduler, or a study's arms interleaved (runner.workers: on Ctrl-C the
    pool stops, every VM is torn down, and the interrupt is re-raised). Then every teardown is
    drained: nothing the pool made outlives it. The schedulers stop with STOPPING and take their
    VMs from VMS: the loop's stop is theirs, and stopping the supply stops every one of them."""
    assert all(s.stopping is stopping and s.vms is vms for s in schedulers), "schedulers share the pool's stop and supply"

    def do(slot: int, item: Episode) -> None:
        which, task, trial = item
        scheduler = schedulers[which]
        record = scheduler.run_one(slot, task, trial)
        if record is not None:
            scheduler.keep(record)

    def slot_ended(slot: int) -> None:
        vms.slot_ended(slot)
        for scheduler in schedulers:
            scheduler.slot_ended(slot)

    take = taking_from(work)
    Workers(take, do, stop_work=vms.stop, still_there=vms.still_there, drain=vms.drain, worker_ended=slot_ended,
            name=lambda slot: f"slot-{slot}", stopping=stopping).run(range(slots), render)
    vms.drain()
