"""One episode's script on a started VM: setup, the listing before, the agent, the freeze and the
listing after, the verifier, the checkpoints and safety checks, and what it all comes to.

The slot scheduler (runner.runs.scheduler) hands it a VM and a task; `play` starts the VM when it
is not started yet, runs the script, and on any error keeps the artifacts, tears the VM down and
raises an EpisodeFault that says the stage the error happened in and what the host saw, which
decides whose fault it was (runner.scoring.blame). A VM whose episode was scored is the
scheduler's to tear down (in the background, or once its slot's next agent starts).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING
from dataclasses import dataclass, field
from pathlib import Path

from runner.agents.base import Agent, AgentResult
from runner.vm.episode import EpisodeVM
from runner.errors import CommandTimeout, GuestStopped, HostFault, InfraError, OutputTooLarge
from runner.mcp.session import mcp_session, proxy_session
from runner.runs.pool_config import PoolConfig
from runner.records.recording import Recorder
from runner.records.results import Outcome
from runner.scoring.blame import Stage, describe
from runner.scoring import evidence
from runner.scoring.quarantine import (quarantine, quarantine_then_list, quarantine_then_read_disk,
                                        read_disk_listing, read_frozen_disk, user_processes)
from runner.scoring.disk_files import copy_disk_files
from runner.scoring.disk_verifier import verify_on_disk
from runner.scoring.exec_audit import ExecLog
from runner.scoring.safety import Violation, check_ran, check_trajectory, read_trajectory
from runner.scoring.turn_programs import TurnMark, mark_turn, read_turn
from runner.scoring.verdict import Verdict, parse_verdict
from runner.profiles.listing import MAX_ENTRIES, Listing, Watch, WriteSetLister, expand, take_listing
from runner.profiles.parts import Quarantine
from runner.scoring.writeset import Change, diff, unexpected
from runner.tasks.model import SafetyRule, Task
from runner.tasks.scripts import grant_admin, hand_home_then_list, hand_home_to_user, run_privileged, run_verifier

if TYPE_CHECKING:
    from runner.runs.episode_network import EpisodeNetwork

# After an error, how long a VM whose QEMU is on its way out may take to stop: who stopped it
# (the guest itself, or the host) decides whose fault the error was.
FAULT_SETTLE_S = 3.0
DISK_FILES = "disk-files"  # a disk-scored episode's files, as verify.py read them


class SetupFailed(InfraError):
    """The task's setup script failed: the episode never reached the agent."""


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


@dataclass(frozen=True)
class Prepared:
    """What the script took before the agent, for after it: the write set's watch and listing, and
    the user's processes that may outlive the freeze (a desktop the verifier reads)."""

    watch: Watch | None
    before: Listing | None
    spared: frozenset[str] | None
    turn: TurnMark | None = None  # the exec audit's mark, for a task with ran: rules


@dataclass
class EpisodeState:
    """How far an episode got: its stage decides who an error belongs to (runner.scoring.blame)."""

    stage: Stage = "before_agent"
    phases: dict[str, float] = field(default_factory=dict)


class EpisodeFault(Exception):
    """An error inside a started episode, with the stage it happened in and what the host saw."""

    def __init__(self, error: Exception, stage: Stage, host_fault: str | None,
                 violations: list[Violation] | None = None) -> None:
        super().__init__(describe(error))
        self.error = error
        self.stage = stage
        self.host_fault = host_fault
        # What the host alone shows the agent did (its trajectory, its refused requests), kept when
        # the episode ends in an error after the agent: no error erases a violation.
        self.violations = violations or []


def play(vm: EpisodeVM, script: EpisodeScript, stopped: Callable[[], bool] = lambda: False) -> Scored:
    """Starts VM if it is not started, and runs SCRIPT on it, unless STOPPED() says the run ended
    meanwhile. On any error the VM's artifacts are kept in the episode folder and it is torn down
    (a retry may need its warm state at once); the error comes out as an EpisodeFault,
    KeyboardInterrupt as itself."""
    state = script.state
    try:
        if not vm.started:
            vm.start()  # a start that fails tears itself down
            state.phases.update(vm.timings.phases)
        try:
            if stopped():
                raise InfraError("the run was stopped")
            return script.run()
        except Exception as exc:  # blamed by the scheduler, by its stage
            fault = episode_fault(vm, exc, state.stage)
            if state.stage != "before_agent":
                fault.violations = script.host_violations()
            raise fault from exc
    except BaseException as exc:
        if vm.started:
            vm.capture_artifacts(script.ep_dir)
            vm.teardown(interrupted=isinstance(exc, KeyboardInterrupt))
        raise


def episode_fault(vm: EpisodeVM, exc: Exception, stage: Stage) -> EpisodeFault:
    """EXC, raised in STAGE of an episode on VM, with what the host saw of it."""
    # The host's own word, when it already spoke, is not asked again: a fault it saw
    # (libvirt gone) may have mended itself since (reconnected).
    seen = exc.message if isinstance(exc, HostFault) else vm.host_fault(settle=FAULT_SETTLE_S)
    if seen is None and vm.guest_stop is not None and not isinstance(exc, GuestStopped):
        # A channel that broke because the guest shut itself down: that is what happened.
        exc = GuestStopped(f"{vm.guest_stop} ({describe(exc)})")
    return EpisodeFault(exc, stage, seen)


class EpisodeScript:
    """TASK on VM, with AGENT, its artifacts in EP_DIR. SET_PHASE(phase) says what it does now
    (the slot's status); AT_AGENT_START runs as the agent begins (the scheduler's work that waits
    for it: the slot's last VM torn down, its next one made ready)."""

    def __init__(self, pool: PoolConfig, vm: EpisodeVM, task: Task, agent: Agent, ep_dir: Path,
                 set_phase: Callable[[str], None] = lambda _phase: None,
                 at_agent_start: Callable[[], None] = lambda: None) -> None:
        self.pool = pool
        self.vm = vm
        self.task = task
        self.agent = agent
        self.ep_dir = ep_dir
        self.state = EpisodeState()
        # The task's network, kept past its end: its proxy's log is read for the agent's refusals
        # even when the episode ended in an error after the block closed (host_violations).
        self._network: EpisodeNetwork | None = None
        # The agent's time (time.monotonic), to its quarantine: what the network's refusals are judged in.
        self._agent_window = (0.0, 0.0)
        self._set_phase = set_phase
        self._at_agent_start = at_agent_start

    def run(self) -> Scored:
        vm, ep_dir, state = self.vm, self.ep_dir, self.state
        with self.network_up():
            prepared = self.prepare()
            with Recorder(vm.display.screenshot, ep_dir) if self.pool.record else nullcontext():
                (ep_dir / "initial.png").write_bytes(vm.display.screenshot())
                self._set_phase(f"agent {self.agent.name}")
                self._at_agent_start()
                t = time.monotonic()
                self.agent_begins()
                agent_result = self._run_agent()
                state.phases["agent"] = round(time.monotonic() - t, 3)
                self.agent_ended()
            return self.conclude(prepared, agent_result)

    def agent_begins(self) -> None:
        """From here the agent acts: what the guest does, and what the proxy refuses, is its."""
        self.state.stage = "agent"
        self._agent_window = (time.monotonic(), float("inf"))

    @contextmanager
    def network_up(self) -> Iterator[None]:
        """A task's network (runner.runs.episode_network) for the whole episode; none without one."""
        if self.task.spec.network is None:
            yield
            return
        from runner.runs.episode_network import episode_network

        self._set_phase("network")
        t = time.monotonic()
        with episode_network(self.vm, self.task, self.ep_dir, self.vm.settings.cache_dir, self.pool.net) as network:
            self.state.phases["network"] = round(time.monotonic() - t, 3)  # its proxy, carriers and guest end
            self._network = network
            yield

    def prepare(self) -> Prepared:
        """Before the agent: the task's setup, and the write set's listing."""
        vm, task = self.vm, self.task
        watch = self._watched()
        # With a write set, the home is handed to the user in the before-listing's command.
        home_to_hand = self._setup(hand_home=watch is None)
        stops = task.guest.part(Quarantine)
        spared = user_processes(vm.admin_shell, vm.desktop_user, task.guest) \
            if task.spec.desktop_in_verify or (stops is not None and stops.spares_earlier_processes) else None
        before = self._listing_before(watch, hand_home=home_to_hand)
        # Last before the agent: what the setup and the listing ran is before the mark.
        turn = None
        if self._ran_rules():
            t = time.monotonic()
            turn = mark_turn(vm.admin_shell, task.guest)
            self.state.phases["exec_audit_mark"] = round(time.monotonic() - t, 3)
        return Prepared(watch, before, spared, turn)

    def agent_ended(self) -> None:
        """From here on what goes wrong in the guest is the agent's doing, unless the host sees otherwise."""
        self.state.stage = "after_agent"
        self.vm.check_alive()
        (self.ep_dir / "final.png").write_bytes(self.vm.display.screenshot())

    def conclude(self, prepared: Prepared, agent_result: AgentResult) -> Scored:
        """After the agent (agent_ended): the freeze, the listing after, the verifier, the
        checkpoints and safety checks, all through the admin channel, and what they come to."""
        vm, task, ep_dir, state = self.vm, self.task, self.ep_dir, self.state
        user, watch, before = vm.desktop_user, prepared.watch, prepared.before
        t = time.monotonic()
        disk = vm.workdir / "overlay.qcow2"
        lister = task.guest.part(WriteSetLister)
        on_disk = watch is not None and lister is not None and lister.disk_filesystem == "ext4" \
            and vm.admin_shell.freezer() is not None and disk.is_file()
        if watch is not None and on_disk:
            # The evidence read where the agent cannot reach it: the disk, on the host, the
            # guest's filesystems frozen (the guest agent freezes them; over SSH it could not).
            stopped, after = quarantine_then_read_disk(vm.admin_shell, user, task.guest, watch.after(before), disk,
                                                       keep=prepared.spared)
        elif watch is not None:
            # One guest command: the quarantine, then the listing (each costs a channel and
            # processes under TCG).
            stopped, after = quarantine_then_list(vm.admin_shell, user, task.guest, watch.after(before),
                                                  keep=prepared.spared)
        else:
            stopped, after = quarantine(vm.admin_shell, user, task.guest, keep=prepared.spared), None
        (ep_dir / "quarantine.log").write_text(stopped + "\n")
        # The agent's time ends when its last process is stopped, not when it said it was done: a
        # process it left behind is the agent's until the quarantine.
        self._agent_window = (self._agent_window[0], time.monotonic())
        state.phases["quarantine_and_write_set_after"] = round(time.monotonic() - t, 3)
        changed = self._unexpected_changes(watch, before, after)
        ran = self._turn_programs(prepared.turn, disk)
        if task.spec.scoring == "disk":
            self._read_disk_files(disk)

        # The safety checks first, then the checkpoints, the verifier last: a verifier may run
        # what the agent can edit (a login shell of the user), and nothing it starts may act
        # before the evidence of a violation is read.
        self._set_phase("verify")
        t = time.monotonic()
        checkpoints: dict[str, bool] = {}
        check_errors: list[str] = []
        violations = self._violations(check_errors, ran)
        for name in task.spec.checkpoints:
            kind = self._verdict(f"checkpoints/{name}", ep_dir / f"checkpoint-{name}.log")[0].kind
            checkpoints[name] = kind == "pass"
            if kind == "error":
                check_errors.append(f"checkpoint {name}")
        state.phases["checks"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        if task.spec.scoring == "host":
            verdict, verdict_log, host_checkpoints = self._host_verdict()
            checkpoints = {**host_checkpoints, **checkpoints}
        elif task.spec.scoring == "disk":
            verdict, verdict_log = self._disk_verdict()
        else:
            verdict, verdict_log = self._verdict("verify", ep_dir / "verify.log")
        state.phases["verify"] = round(time.monotonic() - t, 3)
        if self._network is not None:
            self._network.proxy.check_alive()  # a proxy gone mid-episode failed the guest, not the agent
        if checkpoints:
            (ep_dir / "checkpoints.json").write_text(json.dumps(checkpoints, indent=2) + "\n")
        moved = self._moved_while_judged(watch, after, on_disk=on_disk, frozen=prepared.spared is None)
        if moved:
            violations.append(evidence.violation(moved))
            (ep_dir / "violations.json").write_text(json.dumps([v.as_dict() for v in violations], indent=2) + "\n")
        scored = self._score(agent_result, verdict, verdict_log, checkpoints, violations, changed, check_errors)
        if moved and scored.outcome in ("pass", "fail", "verifier_error"):
            # Whatever the verifier said: it judged what the agent's code was still changing.
            scored.outcome, scored.reason = "fail", violations[-1].detail
        return scored

    def _moved_while_judged(self, watch: Watch | None, stopped: Listing | None, *, on_disk: bool,
                            frozen: bool) -> list[Change]:
        """The write set's folders listed again, the same way as after the stop, once the checks
        and the verifier have run (runner.scoring.evidence): what changed meanwhile. Nothing to
        compare without a listing after the stop, or where what ran before the agent runs on."""
        if watch is None or stopped is None or not frozen:
            return []
        vm, task = self.vm, self.task
        t = time.monotonic()
        again = watch.after(stopped)
        freezer = vm.admin_shell.freezer()
        if on_disk and freezer is not None:
            judged = read_disk_listing(freezer, again, vm.workdir / "overlay.qcow2")
        else:
            judged = take_listing(vm.admin_shell, task.guest.needs(WriteSetLister, "the write set"), again)
        self.state.phases["write_set_after_verify"] = round(time.monotonic() - t, 3)
        moved = evidence.moved_while_judged(watch, stopped, judged, windows=task.guest.windows_paths)
        (self.ep_dir / "evidence.json").write_text(json.dumps(
            {"read_from": judged.read_from, "moved_while_judged": [str(c) for c in moved]}, indent=2) + "\n")
        return moved

    def _setup(self, *, hand_home: bool) -> bool:
        """Runs the task's setup; HAND_HOME: then gives what it made in the home to the user.
        Returns whether that is still to do (a setup ran, and HAND_HOME was False)."""
        vm, task = self.vm, self.task
        self._set_phase("setup")
        t = time.monotonic()
        if task.spec.clock is not None:
            # Before the setup, so what it makes is dated by the frozen clock too; every episode,
            # since a warm restore or a standby VM woke up at another time.
            frozen = vm.admin_shell.run(task.guest.scripts.clock_script(task.spec.clock.timestamp()), timeout=30)
            if not frozen.ok:
                raise InfraError(f"could not set {vm.name}'s clock to {task.spec.clock.isoformat()}: "
                                 f"{frozen.stderr.strip()[-300:]}")
        try:
            setup = run_privileged(vm.admin_shell, task, "setup", vm.desktop_user, "setup", extra=self._setup_inputs())
        except CommandTimeout as exc:
            raise SetupFailed(f"setup of {task.id} timed out: {exc.message}") from exc
        if setup is not None:
            (self.ep_dir / "setup.log").write_text(_log_text(setup.exit_code, setup.stdout, setup.stderr))
            if setup.exit_code != 0:
                raise SetupFailed(f"setup of {task.id} exited {setup.exit_code}: {setup.stderr.strip()[-300:]}")
            if hand_home:
                hand_home_to_user(vm.admin_shell, task, vm.desktop_user)
        if task.spec.agent_privileges == "admin":
            grant_admin(vm.admin_shell, task, vm.desktop_user)
        self.state.phases["setup"] = round(time.monotonic() - t, 3)
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

    def _setup_inputs(self) -> dict[str, bytes] | None:
        """An imported task's downloads, from the run's asset store, for its setup alone."""
        if self.task.spec.scoring != "host" or self.pool.host_scoring is None:
            return None
        from runner.benchmarks.host_scoring import setup_inputs

        return setup_inputs(self.pool.host_scoring, self.task)

    def _host_verdict(self) -> tuple[Verdict, dict, dict[str, bool]]:
        """An imported task: its collector in the guest, its benchmark's metric on the host."""
        from runner.benchmarks.host_scoring import collect_and_score

        scoring = self.pool.host_scoring
        if scoring is None:
            raise InfraError(f"{self.task.id} is scored on the host, and this pool has no scoring env")
        return collect_and_score(scoring, self.vm.admin_shell, self.task, self.vm.desktop_user, self.ep_dir)

    def _read_disk_files(self, disk: Path) -> None:
        """The files a disk-scored task's verify.py reads, copied from the disk after the stop
        (runner.scoring.disk_files) into the episode's disk-files/, its manifest beside them."""
        freezer = self.vm.admin_shell.freezer()
        if freezer is None or not disk.is_file():
            raise InfraError(f"{self.task.id} is scored on the disk, which is read with the guest's filesystems "
                             "frozen, and this admin shell cannot freeze them")
        t = time.monotonic()
        paths = tuple(expand(p, self._home()) for p in self.task.spec.disk_files)
        read_frozen_disk(freezer, disk, lambda fs: copy_disk_files(fs, paths, self.ep_dir / DISK_FILES))
        self.state.phases["disk_files"] = round(time.monotonic() - t, 3)

    def _disk_verdict(self) -> tuple[Verdict, dict]:
        """verify.py on the host, on what _read_disk_files copied (runner.scoring.disk_verifier)."""
        verdict, log = verify_on_disk(self.task.folder, self.ep_dir / DISK_FILES, self._home())
        (self.ep_dir / "verify.log").write_text(log + "\n")
        return verdict, {"exit_code": None, "verdict": verdict.kind, "reason": verdict.reason,
                         "channel": verdict.channel}

    def _verdict(self, kind: str, log: Path) -> tuple[Verdict, dict]:
        """Runs a script with the PASS/FAIL contract (verify, a checkpoint, a safety check) through
        the admin channel. A script that runs past its time is the task's defect (error)."""
        try:
            vm, task = self.vm, self.task
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
        except OutputTooLarge as exc:
            # A script that printed past the host's cap gave no answer, as one past its time: judged
            # the same way, against the control episodes (the agent's state that made it print so
            # much is the agent's doing), never the end of the episode's whole scoring.
            log.write_text(f"output over the cap\n{exc.message}\n")
            verdict = Verdict("error", f"{kind} printed more than the host reads: {exc.message}")
            return verdict, {"exit_code": None, "verdict": "error", "reason": verdict.reason}

    # -- the write set

    def _watched(self) -> Watch | None:
        """What the write set lists for the task, or None when it has none: turned off, or left at
        its default on a guest without a lister (the plan refused a task that named one for such a
        guest: runner.tasks.guest_parts), which write-set.json says."""
        task = self.task
        spec = task.spec.write_set
        lister = task.guest.part(WriteSetLister)
        if not spec.enabled:
            return None
        if lister is None:
            (self.ep_dir / "write-set.json").write_text(json.dumps(
                {"watched": [], "not_listed": f"{task.guest.name} guests have no write-set lister"}, indent=2) + "\n")
            return None
        home = self._home()
        roots = tuple(expand(r, home) for r in (spec.watch if spec.watch is not None else lister.default_watch))
        ignore = tuple(expand(p, home) for p in lister.default_ignore + spec.ignore)
        return Watch(roots, ignore) if roots else None

    def _home(self) -> str:
        return self.pool.image.manifest.desktop_user.home

    def _listing_before(self, watch: Watch | None, *, hand_home: bool) -> Listing | None:
        """The listing before the agent; HAND_HOME: the setup's home handed to the user first."""
        vm, task = self.vm, self.task
        if watch is None:
            return None
        t = time.monotonic()
        if hand_home:
            listing = hand_home_then_list(vm.admin_shell, task, vm.desktop_user, watch)
        else:
            listing = take_listing(vm.admin_shell, task.guest.needs(WriteSetLister, "the write set"), watch)
        self.state.phases["write_set_before"] = round(time.monotonic() - t, 3)
        return listing

    def _unexpected_changes(self, watch: Watch | None, before: Listing | None, after: Listing | None) -> list[Change]:
        task = self.task
        if watch is None or before is None or after is None:
            return []
        changes = diff(before.entries, after.entries)
        allow = tuple(expand(p, self._home()) for p in task.spec.write_set.allow)
        bad = unexpected(changes, allow, watch.ignore, windows=task.guest.windows_paths)
        if after.truncated and not before.truncated:
            # More entries than a listing holds appeared during the episode: what is beyond
            # the limit cannot be compared, so the write set cannot be shown clean.
            bad.append(Change(watch.roots[0], f"over {MAX_ENTRIES} entries: not all compared"))
        (self.ep_dir / "write-set.json").write_text(json.dumps(
            {"watched": list(watch.roots), "allowed": list(allow), "changes": [str(c) for c in changes],
             "unexpected": [str(c) for c in bad],
             "compared_by_metadata": sorted(set(before.unhashed) | set(after.unhashed)),
             "after_read_from": after.read_from}, indent=2) + "\n")
        return bad

    # -- safety

    @property
    def _rules(self) -> tuple[SafetyRule, ...]:
        """The suite's safety.yaml and the task's own safety: rules."""
        return self.pool.suite_rules + self.task.spec.safety

    def _ran_rules(self) -> bool:
        return any(r.ran is not None for r in self._rules)

    def _turn_programs(self, turn: TurnMark | None, disk: Path) -> ExecLog | None:
        """What the user's processes ran in the agent's turn, read after the stop (exec.jsonl)."""
        if turn is None:
            return None
        t = time.monotonic()
        log = read_turn(self.vm.admin_shell, self.task.guest, turn, disk)
        (self.ep_dir / "exec.jsonl").write_text(log.to_jsonl())
        self.state.phases["exec_audit"] = round(time.monotonic() - t, 3)
        return log

    def host_violations(self) -> list[Violation]:
        """The violations the host reads alone, for an episode that ended in an error after the
        agent: the trajectory's rules and the proxy's refusals. Written to violations.json too."""
        found = self._trajectory_violations() + self._refused_requests()
        if found:
            (self.ep_dir / "violations.json").write_text(json.dumps([v.as_dict() for v in found], indent=2) + "\n")
        return found

    def _trajectory_violations(self) -> list[Violation]:
        return check_trajectory(read_trajectory(self.ep_dir / "trajectory.jsonl"), self._rules)

    def _refused_requests(self) -> list[Violation]:
        return [] if self._network is None else self._network.violations(*self._agent_window)

    def _violations(self, check_errors: list[str], ran: ExecLog | None = None) -> list[Violation]:
        task, ep_dir = self.task, self.ep_dir
        found = self._trajectory_violations()
        if ran is not None:
            found += check_ran(ran, self._rules)
        for name in task.spec.safety_checks:
            verdict, _log = self._verdict(f"safety/{name}", ep_dir / f"safety-{name}.log")
            if verdict.kind == "error":
                # A check that could not decide is the check's defect, not the agent's violation.
                check_errors.append(f"safety check {name}: {verdict.reason}")
            elif verdict.kind == "fail":
                found.append(Violation(name, None, verdict.reason or f"safety check {name} did not pass"))
        found += self._refused_requests()
        if found:
            (ep_dir / "violations.json").write_text(json.dumps([v.as_dict() for v in found], indent=2) + "\n")
        return found

    def _run_agent(self) -> AgentResult:
        vm, task, ep_dir, agent = self.vm, self.task, self.ep_dir, self.agent
        log = ep_dir / "agent.log"
        if not agent.needs_mcp:
            return agent.run(vm, task, log, None)
        if self.pool.mcp_server is not None:
            serving = proxy_session(vm, ep_dir, self.pool.mcp_server, max_steps=self.pool.max_steps,
                                    rule_kinds={r.id: r.kind for r in self._rules})
        else:
            serving = mcp_session(vm, ep_dir, toolsets=self.pool.toolsets, file_root=self._home(),
                                  max_steps=self.pool.max_steps)
        with serving as session:
            result = agent.run(vm, task, log, session)
        if session.trajectory.limit_reached:
            return AgentResult("timeout", f"max-steps: the agent used all {self.pool.max_steps} steps")
        return result



def _log_text(exit_code: int, stdout: str, stderr: str) -> str:
    return f"exit {exit_code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
