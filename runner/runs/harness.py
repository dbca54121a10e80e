"""Runs a suite's (task, trial) episodes over a pool of VM slots and records what happened.

Each slot is a worker thread with its own VM at a time (domain cu-<run>-<slot>). An
episode: overlay -> start -> ready -> setup -> write-set listing -> initial screenshot ->
agent -> final screenshot -> write-set listing -> verify -> checkpoints -> safety checks ->
artifacts -> teardown, the teardown on every path. Broken infrastructure is retried on a
fresh VM and never scored as the agent's failure.
"""

from __future__ import annotations

import json
import logging
import queue
import shutil
import threading
import time
import traceback
from contextlib import nullcontext
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from runner.mcp.proxy import ExternalServer
from runner.mcp.session import mcp_session, proxy_session
from runner.mcp.trajectory import append_intervention
from runner.agents.base import Agent, AgentResult
from runner.agents.builtin import NopAgent, OracleAgent
from runner.scoring.blame import Stage, blame, describe
from runner.images.catalog import Image
from runner.config import Settings, private_dir
from runner.episode import EpisodeOptions, EpisodeVM
from runner.errors import CommandTimeout, GuestStopped, HostFault, InfraError
from runner.hypervisor.domain_xml import Accel
from runner.hypervisor.host import Host
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.scoring.quarantine import quarantine, quarantine_then_list, user_processes
from runner.runs.recording import Recorder
from runner.runs.results import EpisodeRecord, Outcome, ResultLog, keep_record
from runner.runs.standby import Standbys
from runner.scoring.safety import Violation, check_trajectory, read_trajectory
from runner.tasks.scripts import grant_admin, hand_home_then_list, hand_home_to_user, run_privileged, run_verifier
from runner.tasks.model import SafetyRule, Task
from runner.scoring.verdict import Verdict, parse_verdict
from runner.images.warm_state import SlotLock, WarmSlot, slot_lock
from runner.scoring.writeset import (
    MAX_ENTRIES,
    Change,
    Listing,
    Watch,
    diff,
    expand,
    take_listing,
    unexpected,
)

log = logging.getLogger(__name__)

INFRA_RETRIES = 2
# After an error, how long a VM whose QEMU is on its way out may take to stop: who stopped it
# (the guest itself, or the host) decides whose fault the error was.
FAULT_SETTLE_S = 3.0
STOP_GRACE_S = 120.0


class SetupFailed(InfraError):
    """The task's setup script failed: the episode never reached the agent."""


@dataclass
class SlotStatus:
    task_id: str = ""
    trial: int = 0
    phase: str = "idle"
    since: float = field(default_factory=time.monotonic)  # when this phase began
    episode_since: float = field(default_factory=time.monotonic)  # when this (task, trial) began on the slot


@dataclass(frozen=True)
class PoolConfig:
    image: Image
    accel: Accel
    vm_pool: int
    run_id: str
    infra_retries: int = INFRA_RETRIES
    toolsets: tuple[str, ...] = DEFAULT_TOOLSETS  # what an MCP-driven agent may use
    max_steps: int | None = None
    warm: dict[int, WarmSlot] = field(default_factory=dict)  # pool slot -> its warm state; empty: cold
    spare_warm: tuple[WarmSlot, ...] = ()  # more warm states: restored while a slot's last VM is torn down
    suite_rules: tuple[SafetyRule, ...] = ()  # the suite's safety.yaml
    record: bool = False  # each episode's screen to recording.mp4 (runner.runs.recording)
    mcp_server: ExternalServer | None = None  # an external MCP server's tools instead of cu-run's (runner.mcp.proxy)
    standby: bool = True  # with spare warm states: each slot's next VM made ready ahead (runner.runs.standby)


@dataclass
class Scored:
    """What one episode came to, beyond its outcome."""

    outcome: Outcome
    reason: str
    agent: AgentResult
    verifier: dict
    checkpoints: dict[str, bool] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    check_errors: list[str] = field(default_factory=list)  # checkpoints and safety checks that could not decide


@dataclass
class EpisodeState:
    """How far an episode got: its stage decides who an error belongs to (runner.scoring.blame)."""

    stage: Stage = "before_agent"
    phases: dict[str, float] = field(default_factory=dict)


class EpisodeFault(Exception):
    """An error inside a started episode, with the stage it happened in and what the host saw."""

    def __init__(self, error: Exception, stage: Stage, host_fault: str | None) -> None:
        super().__init__(describe(error))
        self.error = error
        self.stage = stage
        self.host_fault = host_fault


class Harness:
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
        """Runs every (task, trial) in WORK; on Ctrl-C stops the pool, tears every VM down, re-raises."""
        for item in work:
            self._queue.put(item)
        # Workers say they are finished through events, not Thread.join: a join interrupted by
        # Ctrl-C can leave CPython (< 3.13) believing the thread has ended while it still runs
        # its teardown, and the process would then exit under it.
        finished = [threading.Event() for _ in range(min(self.pool.vm_pool, len(work)))]
        for slot, done in enumerate(finished):
            threading.Thread(target=self._worker, args=(slot, done), name=f"slot-{slot}", daemon=True).start()
        try:
            while not all(done.is_set() for done in finished):
                render()
                finished[[d.is_set() for d in finished].index(False)].wait(0.5)
            render()
        except KeyboardInterrupt:
            self.stop()
            deadline = time.monotonic() + STOP_GRACE_S
            for done in finished:
                done.wait(timeout=max(0.0, deadline - time.monotonic()))
            self.drain(max(0.0, deadline - time.monotonic()))
            raise
        self.drain()

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

    def _worker(self, slot: int, finished: threading.Event) -> None:
        try:
            while not self._stop.is_set():
                try:
                    task, trial = self._queue.get_nowait()
                except queue.Empty:
                    break
                record = self.run_one(slot, task, trial)
                if record is not None:
                    self.keep(record)
        finally:
            self._standbys.discard(slot)
            self._tear_down_last(slot)
            self.status[slot] = SlotStatus()
            finished.set()

    def run_one(self, slot: int, task: Task, trial: int) -> EpisodeRecord | None:
        """One (task, trial) on SLOT, infra errors retried on a fresh VM: its record, which is not
        written to the results (the caller keeps it), or None when the run was stopped first."""
        try:
            record = self._with_retries(slot, task, trial)
            if record is not None and record.outcome == "verifier_error":
                record = self._judge_verifier_error(slot, task, record)
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
        state = EpisodeState()
        if self._standbys.has(slot):
            self._set(slot, task, trial, "standby")
        vm, waited = self._standbys.take(slot, self._stop)
        if vm is not None:
            vm.artifacts = ep_dir
            # Made before this episode began: its start is not part of this episode's time.
            state.phases.update({f"standby_{k}": v for k, v in vm.timings.phases.items()})
            state.phases["standby_wait"] = round(waited, 3)
        else:
            self._tear_down_last(slot)  # it may hold the warm state this start needs
            warm, warm_lock = self._claim_warm(slot)
            self._set(slot, task, trial, "restore" if warm else "boot")
            vm = self._new_vm(slot, warm, warm_lock, artifacts=ep_dir)
        self._active[slot] = vm
        try:
            if not vm.started:
                vm.start()  # a start that fails tears itself down
                state.phases.update(vm.timings.phases)
            try:
                if self._stop.is_set():
                    raise InfraError("the run was stopped")
                try:
                    scored = self._act_and_verify(vm, slot, task, trial, ep_dir, state, agent,
                                                  at_agent_start=lambda: self._agent_starts(slot))
                except Exception as exc:  # noqa: BLE001 - blamed by phase in _with_retries
                    # The host's own word, when it already spoke, is not asked again: a fault
                    # it saw (libvirt gone) may have mended itself since (reconnected).
                    seen = exc.message if isinstance(exc, HostFault) else vm.host_fault(settle=FAULT_SETTLE_S)
                    if seen is None and vm.guest_stop is not None and not isinstance(exc, GuestStopped):
                        # A channel that broke because the guest shut itself down: that is what happened.
                        exc = GuestStopped(f"{vm.guest_stop} ({describe(exc)})")
                    raise EpisodeFault(exc, state.stage, seen) from exc
            except BaseException as exc:
                # A failed episode is torn down here, its artifacts kept first: a retry may
                # need the slot's warm state at once.
                vm.capture_artifacts(ep_dir)
                vm.teardown(interrupted=isinstance(exc, KeyboardInterrupt))
                raise
            finally:
                self._tear_down_last(slot)  # when the agent never started
            if self._standbys.has(slot):
                self._last_vm[slot] = (vm, ep_dir)  # the next episode starts on the standby
            else:
                self._teardown_later(vm, ep_dir)
        finally:
            self._active.pop(slot, None)
        record = EpisodeRecord(task.id, trial, scored.outcome, scored.reason, round(time.monotonic() - t0, 2), slot,
                               attempt, started.isoformat(), datetime.now(UTC).isoformat(), state.phases,
                               checkpoints=scored.checkpoints, violations=[v.as_dict() for v in scored.violations],
                               changed=[str(c) for c in scored.changed], check_errors=scored.check_errors)
        (ep_dir / "episode.json").write_text(json.dumps(
            {**asdict(record), "agent": agent.name, "agent_ended": scored.agent.ended,
             "agent_reason": scored.agent.reason, "verifier": scored.verifier, "domain": vm.name}, indent=2) + "\n")
        return record

    def _act_and_verify(self, vm: EpisodeVM, slot: int, task: Task, trial: int, ep_dir: Path,
                        state: EpisodeState, agent: Agent,
                        at_agent_start: Callable[[], None] = lambda: None) -> Scored:
        user = vm.desktop_user
        watch = self._watched(task)
        # With a write set, the home is handed to the user in the before-listing's command.
        home_to_hand = self._setup(vm, slot, task, trial, ep_dir, state, hand_home=watch is None)
        spared = user_processes(vm.admin_shell, user, task.guest) \
            if task.spec.desktop_in_verify or task.guest.spares_earlier_processes else None
        before = self._listing_before(vm, task, watch, state.phases, hand_home=home_to_hand)
        with Recorder(vm.display.screenshot, ep_dir) if self.pool.record else nullcontext():
            (ep_dir / "initial.png").write_bytes(vm.display.screenshot())
            self._set(slot, task, trial, f"agent {agent.name}")
            at_agent_start()
            state.stage = "agent"
            t = time.monotonic()
            agent_result = self._run_agent(vm, task, ep_dir, agent)
            state.phases["agent"] = round(time.monotonic() - t, 3)
            # From here on what goes wrong in the guest is the agent's doing, unless the host sees otherwise.
            state.stage = "after_agent"
            vm.check_alive()
            (ep_dir / "final.png").write_bytes(vm.display.screenshot())
        t = time.monotonic()
        if watch is not None:
            # One guest command: the quarantine, then the listing (each costs a channel and
            # processes under TCG).
            stopped, after = quarantine_then_list(vm.admin_shell, user, task.guest, watch.after(before), keep=spared)
        else:
            stopped, after = quarantine(vm.admin_shell, user, task.guest, keep=spared), None
        (ep_dir / "quarantine.log").write_text(stopped + "\n")
        state.phases["quarantine_and_write_set_after"] = round(time.monotonic() - t, 3)
        changed = self._unexpected_changes(task, watch, before, after, ep_dir)

        self._set(slot, task, trial, "verify")
        t = time.monotonic()
        verdict, verdict_log = self._verdict(vm, task, "verify", ep_dir / "verify.log")
        state.phases["verify"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        checkpoints, check_errors = {}, []
        for name in task.spec.checkpoints:
            kind = self._verdict(vm, task, f"checkpoints/{name}", ep_dir / f"checkpoint-{name}.log")[0].kind
            checkpoints[name] = kind == "pass"
            if kind == "error":
                check_errors.append(f"checkpoint {name}")
        violations = self._violations(vm, task, ep_dir, check_errors)
        state.phases["checks"] = round(time.monotonic() - t, 3)
        if checkpoints:
            (ep_dir / "checkpoints.json").write_text(json.dumps(checkpoints, indent=2) + "\n")
        return self._score(agent_result, verdict, verdict_log, checkpoints, violations, changed, check_errors)

    def _setup(self, vm: EpisodeVM, slot: int, task: Task, trial: int, ep_dir: Path, state: EpisodeState, *,
               hand_home: bool) -> bool:
        """Runs the task's setup; HAND_HOME: then gives what it made in the home to the user.
        Returns whether that is still to do (a setup ran, and HAND_HOME was False)."""
        self._set(slot, task, trial, "setup")
        t = time.monotonic()
        try:
            setup = run_privileged(vm.admin_shell, task, "setup", vm.desktop_user, "setup")
        except CommandTimeout as exc:
            raise SetupFailed(f"setup of {task.id} timed out: {exc.message}") from exc
        if setup is not None:
            (ep_dir / "setup.log").write_text(_log_text(setup.exit_code, setup.stdout, setup.stderr))
            if setup.exit_code != 0:
                raise SetupFailed(f"setup of {task.id} exited {setup.exit_code}: {setup.stderr.strip()[-300:]}")
            if hand_home:
                hand_home_to_user(vm.admin_shell, task, vm.desktop_user)
        if task.spec.agent_privileges == "admin":
            grant_admin(vm.admin_shell, task, vm.desktop_user)
        state.phases["setup"] = round(time.monotonic() - t, 3)
        return setup is not None and not hand_home

    @staticmethod
    def _score(agent_result: AgentResult, verdict: Verdict, verdict_log: dict, checkpoints: dict[str, bool],
               violations: list[Violation], changed: list[Change], check_errors: list[str]) -> Scored:
        scored = Scored("fail", "", agent_result, verdict_log, checkpoints, violations, changed, check_errors)
        if agent_result.ended == "timeout":
            scored.outcome, scored.reason = "timeout", agent_result.reason
        elif agent_result.ended == "error":
            scored.outcome, scored.reason = "agent_error", agent_result.reason
        else:
            outcomes: dict[str, Outcome] = {"pass": "pass", "fail": "fail", "error": "verifier_error"}
            scored.outcome = outcomes[verdict.kind]
            scored.reason = verdict.reason
            if scored.outcome == "pass" and changed:
                shown = ", ".join(str(c) for c in changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
                scored.outcome, scored.reason = "fail", f"changed outside the allowed paths: {shown}"
        return scored

    def _verdict(self, vm: EpisodeVM, task: Task, kind: str, log: Path) -> tuple[Verdict, dict]:
        """Runs a script with the PASS/FAIL contract (verify, a checkpoint, a safety check) through
        the admin channel. A script that runs past its time is the task's defect (error)."""
        try:
            ran = run_verifier(vm.admin_shell, task, kind, vm.desktop_user, timeout=task.spec.verify_timeout_s)
            assert ran is not None
            result = ran.result
            log.write_text(_log_text(result.exit_code, result.stdout, result.stderr)
                           + ("" if ran.recorded is None else f"--- verdict\n{ran.recorded}\n"))
            verdict = parse_verdict(result.stdout, result.exit_code, ran.recorded)
            return verdict, {"exit_code": result.exit_code, "verdict": verdict.kind, "reason": verdict.reason,
                             "channel": verdict.channel}
        except CommandTimeout as exc:
            log.write_text(f"timed out\n--- stdout\n{exc.stdout}\n--- stderr\n{exc.stderr}")
            verdict = Verdict("error", f"{kind} timed out: {exc.message}")
            return verdict, {"exit_code": None, "verdict": "error", "reason": verdict.reason}

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
        controls = (NopAgent(),) if isinstance(self.agent, OracleAgent) else (NopAgent(), OracleAgent())
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

    # -- the write set

    def _watched(self, task: Task) -> Watch | None:
        """What the write set lists for TASK, or None when it has none."""
        spec = task.spec.write_set
        if not spec.enabled:
            return None
        home = self._home()
        roots = tuple(expand(r, home) for r in (spec.watch if spec.watch is not None else task.guest.default_watch))
        ignore = tuple(expand(p, home) for p in task.guest.default_ignore + spec.ignore)
        return Watch(roots, ignore) if roots else None

    def _home(self) -> str:
        return self.pool.image.manifest.desktop_user.home

    def _listing_before(self, vm: EpisodeVM, task: Task, watch: Watch | None, phases: dict[str, float], *,
                        hand_home: bool) -> Listing | None:
        """The listing before the agent; HAND_HOME: the setup's home handed to the user first."""
        if watch is None:
            return None
        t = time.monotonic()
        if hand_home:
            listing = hand_home_then_list(vm.admin_shell, task, vm.desktop_user, watch)
        else:
            listing = take_listing(vm.admin_shell, task.guest, watch)
        phases["write_set_before"] = round(time.monotonic() - t, 3)
        return listing

    def _unexpected_changes(self, task: Task, watch: Watch | None, before: Listing | None,
                            after: Listing | None, ep_dir: Path) -> list[Change]:
        if watch is None or before is None or after is None:
            return []
        changes = diff(before.entries, after.entries)
        allow = tuple(expand(p, self._home()) for p in task.spec.write_set.allow)
        bad = unexpected(changes, allow, watch.ignore, windows=task.guest.windows_paths)
        if after.truncated and not before.truncated:
            # More entries than a listing holds appeared during the episode: what is beyond
            # the limit cannot be compared, so the write set cannot be shown clean.
            bad.append(Change(watch.roots[0], f"over {MAX_ENTRIES} entries: not all compared"))
        (ep_dir / "write-set.json").write_text(json.dumps(
            {"watched": list(watch.roots), "allowed": list(allow), "changes": [str(c) for c in changes],
             "unexpected": [str(c) for c in bad],
             "compared_by_metadata": sorted(set(before.unhashed) | set(after.unhashed))}, indent=2) + "\n")
        return bad

    # -- safety

    def _violations(self, vm: EpisodeVM, task: Task, ep_dir: Path, check_errors: list[str]) -> list[Violation]:
        rules = self.pool.suite_rules + task.spec.safety
        found = check_trajectory(read_trajectory(ep_dir / "trajectory.jsonl"), rules)
        for name in task.spec.safety_checks:
            verdict, _log = self._verdict(vm, task, f"safety/{name}", ep_dir / f"safety-{name}.log")
            if verdict.kind == "error":
                # A check that could not decide is the check's defect, not the agent's violation.
                check_errors.append(f"safety check {name}: {verdict.reason}")
            elif verdict.kind == "fail":
                found.append(Violation(name, None, verdict.reason or f"safety check {name} did not pass"))
        if found:
            (ep_dir / "violations.json").write_text(json.dumps([v.as_dict() for v in found], indent=2) + "\n")
        return found

    def _run_agent(self, vm: EpisodeVM, task: Task, ep_dir: Path, agent: Agent) -> AgentResult:
        log = ep_dir / "agent.log"
        if not agent.needs_mcp:
            return agent.run(vm, task, log, None)
        if self.pool.mcp_server is not None:
            rules = self.pool.suite_rules + task.spec.safety
            serving = proxy_session(vm, ep_dir, self.pool.mcp_server, max_steps=self.pool.max_steps,
                                    rule_kinds={r.id: r.kind for r in rules})
        else:
            serving = mcp_session(vm, ep_dir, toolsets=self.pool.toolsets, file_root=self._home(),
                                  max_steps=self.pool.max_steps)
        with serving as session:
            result = agent.run(vm, task, log, session)
        if session.trajectory.limit_reached:
            return AgentResult("timeout", f"max-steps: the agent used all {self.pool.max_steps} steps")
        return result

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
        self._tear_down_last(slot)
        self._prepare_standby(slot)

    def _tear_down_last(self, slot: int) -> None:
        """Starts tearing down SLOT's last VM, if it still waits for that."""
        last = self._last_vm.pop(slot, None)
        if last is not None:
            self._teardown_later(*last)

    def _prepare_standby(self, slot: int) -> None:
        """Makes SLOT's next VM ready in the background, while this episode runs, when there is
        more work and a warm state free for it (runner.runs.standby)."""
        if not self.pool.standby or self._queue.empty() or self._stop.is_set():
            return

        def make() -> EpisodeVM | None:
            free = self._free_warm(slot)
            if free is None:
                return None
            return self._new_vm(slot, *free)

        self._standbys.prepare(slot, make)

    def _new_vm(self, slot: int, warm: WarmSlot | None, warm_lock: SlotLock | None,
                artifacts: Path | None = None) -> EpisodeVM:
        """An (unstarted) VM of this pool's for SLOT; ARTIFACTS: its episode's folder, once known."""
        return EpisodeVM(self.host, self.pool.image, self.settings, run_id=self.pool.run_id, slot=slot,
                         options=EpisodeOptions(accel=self.pool.accel), artifacts=artifacts, warm=warm,
                         warm_lock=warm_lock)

    def _teardown_later(self, vm: EpisodeVM, ep_dir: Path) -> None:
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


def _log_text(exit_code: int, stdout: str, stderr: str) -> str:
    return f"exit {exit_code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
