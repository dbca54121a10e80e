"""`cu-run run` and `cu-run validate`: the run scope around the harness.

Load and check the suite, agent and image before any VM starts; write provenance; run
the pool; write the summary. Results are appended as episodes end, so an interrupted
run resumes with --resume and redoes only what has no result.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from runner.agents.base import Agent
from runner.agents.registry import make_agent
from runner.images.catalog import Catalog, Image
from runner.config import Settings, private_dir
from runner.episode import EPISODE_MIN_FREE_BYTES, check_free_space
from runner.errors import UsageError
from runner.runs.harness import Harness, PoolConfig
from runner.hypervisor.libvirt_host import LibvirtHost
from runner.mcp.proxy import ExternalServer
from runner.mcp.server import DEFAULT_TOOLSETS, resolve_toolsets
from runner.profiles import get_profile
from runner.runs.admission import Admission, admit, available_mib
from runner.runs.standby import leaves_a_core
from runner.runs.provenance import host_facts, runner_facts
from runner.runs.report import write_reports
from runner.tasks.lint import errors, lint_task_scripts
from runner.runs.results import LOCAL_HOST, RESULTS, EpisodeRecord, ResultLog, missing, summarize
from runner.session import new_run_id, resolve_accel
from runner.tasks.model import Suite, Task, load_suite
from runner.tasks.selection import load_selection
from runner.images.start_plan import StartPlan, plan_start
from runner.images.windows_11 import licence_warning

EXIT_INFRA = 3
EXIT_GATE = 4


@dataclass(frozen=True)
class RunRequest:
    suite: str
    agent: str
    tasks: tuple[str, ...] = ()
    vm_pool: int = 1
    trials: int = 1
    out: Path | None = None
    resume: bool = False
    fail_under: float | None = None
    image: str | None = None
    accel: str = "auto"
    tools: tuple[str, ...] = DEFAULT_TOOLSETS
    max_steps: int | None = None
    agent_cmd: str | None = None
    max_turns: int = 50
    start: str = "auto"
    gate: str = "all"  # --fail-under over all tasks, or only the stable (non-flaky) ones
    agent_script: str = "ui_oracle.yaml"  # the scripted agent's script, per task
    record: bool = False  # each episode's screen to recording.mp4
    cluster: str | None = None  # a Ray cluster's address: run on its cu-run hosts (runner.cluster)
    selection: Path | None = None  # a selection.yaml of `cu-run tasks select`: its tasks, in its order
    mcp_server: str | None = None  # an external MCP server's command, started per episode ({vnc} filled in)
    mcp_server_url: str | None = None  # or its URL
    append_prompt: str = ""  # claude/codex: text after cu-run's system prompt (a vendor's skill text)
    agent_env: tuple[tuple[str, str], ...] = ()  # the agent's environment, over the runner's
    timeout_s: int | None = None  # every task's timeout_s, overridden (a study arm's)
    live: bool = False  # serve the live view (runner.live) while the pool runs
    live_port: int = 0
    live_host: str = "127.0.0.1"
    live_control: bool = False  # the live view may take the mouse and keyboard (recorded as interventions)
    standby: bool = True  # with spare warm states, each slot's next VM is made ready ahead (runner.runs.standby)


@dataclass(frozen=True)
class RunResult:
    out_dir: Path
    summary: dict
    records: list[EpisodeRecord]
    exit_code: int


@dataclass(frozen=True)
class RunPlan:
    """What a run is, checked before any VM starts: every refusal of bad input happens here."""

    suite: Suite
    tasks: tuple[Task, ...]
    agent: Agent
    image: Image
    out_dir: Path
    previous: dict | None  # run.json of the run being resumed

    def planned(self, trials: int) -> list[tuple[str, int]]:
        return [(t.id, trial) for trial in range(1, trials + 1) for t in self.tasks]


def plan_run(settings: Settings, request: RunRequest) -> RunPlan:
    if request.vm_pool < 1 or request.trials < 1:
        raise UsageError("--vm-pool and --trials must be at least 1")
    if request.fail_under is not None and not 0 <= request.fail_under <= 1:
        raise UsageError(f"--fail-under is a rate between 0 and 1, not {request.fail_under}")
    if request.gate not in ("all", "stable"):
        raise UsageError(f"--gate must be all or stable, not {request.gate!r}")
    if request.max_steps is not None and request.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    check_live_options(request)
    suite = load_suite(request.suite)
    if request.selection is not None and request.tasks:
        raise UsageError("--tasks and --selection both choose the tasks", fix="give one of them")
    ids = load_selection(request.selection, suite) if request.selection is not None else list(request.tasks)
    tasks = suite.select(ids)
    check_scripts(tasks)
    profile = _profile(suite, tasks)
    resolve_toolsets(request.tools)
    if request.timeout_s is not None:
        tasks = tuple(replace(t, spec=t.spec.model_copy(update={"timeout_s": request.timeout_s})) for t in tasks)
    agent = make_agent(request.agent, tasks, command=request.agent_cmd, max_turns=request.max_turns,
                       script=request.agent_script, append_prompt=request.append_prompt,
                       env=dict(request.agent_env))
    external_server(request, agent)
    image = Catalog(settings.images_dir).get(request.image or get_profile(profile).default_image)
    if image.manifest.profile != profile:
        raise UsageError(f"suite {suite.name} is for {profile} guests but image {image.name} is {image.manifest.profile}",
                         fix=f"pass --image with a {profile} image")
    if (missing_admin := image.manifest.admin_access_missing()) is not None:
        raise UsageError(f"image {image.name}: {missing_admin}", fix=f"rebuild it: cu-run image build {image.name} --force")
    out_dir = (request.out or Path("runs") / f"{suite.name}-{agent.name}-{datetime.now(UTC):%Y%m%dT%H%M%S}").resolve()
    previous = _check_out_dir(out_dir, ResultLog(out_dir), request.resume, suite)
    check_free_space(settings.episodes_dir, request.vm_pool * EPISODE_MIN_FREE_BYTES,
                     f"a pool of {request.vm_pool} episode VMs")
    image.verify_disk()
    return RunPlan(suite, tasks, agent, image, out_dir, previous)


def run_suite(settings: Settings, request: RunRequest, console: Console) -> RunResult:
    plan = plan_run(settings, request)
    if (warning := licence_warning(plan.image)) is not None:
        console.print(f"[yellow]{warning}[/]")
    if request.cluster:
        from runner.cluster.driver import run_on_cluster

        return run_on_cluster(request, plan, console)
    machine = open_machine(settings, request, plan.image, console)
    try:
        harness, log, provenance, work = begin_local(settings, request, plan, machine, console)
        with _live_view(request, plan, harness, work, console), finishing(plan, request, log, provenance, console):
            _run_pool(harness, work, console)
    finally:
        machine.host.close()
    return finish_run(plan, request, log, provenance, console)


@dataclass(frozen=True)
class Machine:
    """This host as runs use it: libvirt, the accelerator, the pool its memory admits, how VMs start."""

    host: LibvirtHost
    accel: str
    probe: str
    admission: Admission
    start: StartPlan

    @property
    def vm_pool(self) -> int:
        return self.admission.admitted


def open_machine(settings: Settings, request: RunRequest, image: Image, console: Console) -> Machine:
    accel, probe = resolve_accel(settings, image, request.accel)
    admission = admit(request.vm_pool, image.manifest.memory_mib, accel, available_mib())
    if admission.capped:
        console.print(f"[yellow]{escape(admission.notice(image.name))}[/]")
    host = LibvirtHost(settings.libvirt_uri)
    try:
        start = plan_start(request.start, host, image, accel, settings.libvirt_uri, admission.admitted)
    except BaseException:
        host.close()
        raise
    if start.notice:
        console.print(f"[yellow]{start.notice}[/]")
    return Machine(host, accel, probe.reason, admission, start)


def begin_local(settings: Settings, request: RunRequest, plan: RunPlan, machine: Machine,
                console: Console) -> tuple[Harness, ResultLog, dict, list[tuple[Task, int]]]:
    """A run's harness on MACHINE, its results log, its provenance (written) and what is left to do."""
    log = ResultLog(plan.out_dir)
    finished = log.finished()
    work = [(t, trial) for trial in range(1, request.trials + 1) for t in plan.tasks if (t.id, trial) not in finished]
    private_dir(plan.out_dir)
    provenance = _provenance(settings, request, plan, machine.host, machine.accel, machine.probe, machine.start)
    admission = machine.admission
    provenance["pool"] = {"asked": request.vm_pool, "used": machine.vm_pool, "per_vm_mib": admission.per_vm_mib,
                          "available_mib": admission.available_mib}
    write_json(plan.out_dir / "run.json", provenance)
    console.print(f"run {plan.out_dir}: {len(work)} episodes to go "
                  f"({len(plan.tasks)} tasks x {request.trials} trials, {len(finished)} done before), "
                  f"pool {machine.vm_pool}, {machine.accel.upper()}, {machine.start.mode} start, agent {plan.agent.name}")
    pool = PoolConfig(image=plan.image, accel=machine.accel, vm_pool=machine.vm_pool, run_id=new_run_id(),
                      toolsets=request.tools, max_steps=request.max_steps, warm=machine.start.slots,
                      # A spare's VM runs beside the pool's (a teardown's overlap, a standby): only
                      # as many as the host's memory holds besides.
                      spare_warm=machine.start.spares[:admission.room_beside],
                      standby=request.standby and leaves_a_core(machine.vm_pool),
                      suite_rules=plan.suite.safety, record=request.record,
                      mcp_server=external_server(request, plan.agent))
    harness = Harness(machine.host, settings, pool, plan.agent, plan.out_dir,
                      on_record=lambda r: print_record(console, r))
    return harness, log, provenance, work


@contextmanager
def finishing(plan: RunPlan, request: RunRequest, log: ResultLog, provenance: dict, console: Console) -> Iterator[None]:
    """Around a run's pool: an interrupted run says how far it got, and the reports are
    written from what the log holds however the pool ends."""
    planned = plan.planned(request.trials)
    try:
        yield
    except KeyboardInterrupt:
        done = len(planned) - len(missing(log.latest(), planned))
        console.print(f"interrupted: {done} of {len(planned)} episodes have a result; "
                      "the same command with --resume continues the run", highlight=False)
        _report(plan, request, log, provenance)
        raise
    except BaseException:
        _report(plan, request, log, provenance)
        raise


def finish_run(plan: RunPlan, request: RunRequest, log: ResultLog, provenance: dict, console: Console,
               why_lost: str | None = None) -> RunResult:
    """The summary, reports and exit code of a run whose pool has ended."""
    records, summary = _report(plan, request, log, provenance)
    _print_summary(console, summary)
    console.print(f"report: {plan.out_dir / 'report.html'}")
    lost = missing(records, plan.planned(request.trials))
    exit_code, message = run_exit_code(summary, lost, request.fail_under, request.gate)
    if lost and why_lost:
        message = f"{why_lost}: {message}"
    if message:
        console.print(f"[bold red]{escape(message)}[/]", highlight=False)
    return RunResult(plan.out_dir, summary, records, exit_code)


def _provenance(settings: Settings, request: RunRequest, plan: RunPlan, host: LibvirtHost, accel: str,
                probe: str, start: StartPlan) -> dict:
    """run.json of a run on this machine."""
    return base_provenance(request, plan, {
        "host": host_facts(),
        "accel": {"used": accel, "requested": request.accel, "probe": probe},
        "start": {"used": start.mode, "requested": request.start, "notice": start.notice},
        "hypervisor": {"libvirt_uri": settings.libvirt_uri, **host.versions()},
    })


def base_provenance(request: RunRequest, plan: RunPlan, where: dict) -> dict:
    """run.json: what ran, plus WHERE it ran; a resumed run keeps the first and notes when it resumed."""
    started_at = datetime.now(UTC).isoformat()
    if plan.previous:
        plan.previous["resumed_at"].append(started_at)
        return plan.previous
    tasks, image = plan.tasks, plan.image
    return {
        "started_at": started_at,
        **where,
        "image": {"name": image.name, "profile": image.manifest.profile, "sha256": image.manifest.disk_sha256,
                  "builder": image.manifest.builder},
        "suite": {"name": plan.suite.name, "path": str(plan.suite.folder), "content_sha256": plan.suite.content_hash(),
                  "tasks": [t.id for t in tasks], "not_tamper_proof": not_tamper_proof(tasks)},
        "agent": {"name": plan.agent.name, "version": plan.agent.version()},
        "runner": runner_facts(),
        "arguments": _arguments(request),
        "resumed_at": [],
    }


def check_live_options(request: RunRequest) -> None:
    from runner.live import check_live_flags

    check_live_flags(request.live, request.live_port, request.live_host, request.live_control)
    if request.live and request.cluster:
        raise UsageError("--live serves the slots of this machine; a --cluster run's VMs are on its hosts",
                         fix="drop --live, or run without --cluster")


def _live_view(request: RunRequest, plan: RunPlan, harness: Harness, work: list[tuple[Task, int]],
               console: Console) -> AbstractContextManager:
    """The live view of the pool (--live), or nothing."""
    if not request.live:
        return nullcontext()
    from runner.live import LiveOptions, serving
    from runner.live.sources import HarnessSource

    total = len(plan.planned(request.trials))
    source = HarnessSource(harness, f"{plan.suite.name} / {plan.agent.name}", total, done_before=total - len(work))
    shown = harness.on_record

    def on_record(record: EpisodeRecord) -> None:
        source.record(record)
        shown(record)

    harness.on_record = on_record
    options = LiveOptions(port=request.live_port, host=request.live_host, control=request.live_control)
    return serving(source, options, lambda line: console.print(line, soft_wrap=True, markup=False, highlight=False),
                   run_dir=plan.out_dir)


def _run_pool(harness: Harness, work: list[tuple[Task, int]], console: Console) -> None:
    if work:
        with Live(_status_table(harness), console=console, refresh_per_second=2, transient=True) as live:
            harness.run(work, render=lambda: live.update(_status_table(harness)))


def _report(plan: RunPlan, request: RunRequest, log: ResultLog, provenance: dict) -> tuple[list[EpisodeRecord], dict]:
    """summary.json, the end time in run.json, report.html and junit.xml, from what the log holds."""
    wanted = {t.id for t in plan.tasks}
    records = [r for r in log.latest() if r.task_id in wanted and r.trial <= request.trials]
    summary = summarize(records, [t.id for t in plan.tasks], tuple(provenance["suite"].get("not_tamper_proof", ())))
    write_json(plan.out_dir / "summary.json", summary)
    provenance["ended_at"] = datetime.now(UTC).isoformat()
    write_json(plan.out_dir / "run.json", provenance)
    write_reports(plan.out_dir)
    return records, summary


def run_exit_code(summary: dict, lost: list[tuple[str, int]], fail_under: float | None,
                  gate: str) -> tuple[int, str | None]:
    """The run's exit code and what to say about it: 3 when a planned episode has no record or
    ended in an infra error, 4 when --fail-under is missed, else 0."""
    if lost:
        return EXIT_INFRA, f"{len(lost)} planned episodes have no result: " + ", ".join(f"{t} #{n}" for t, n in lost)
    if summary["overall"]["outcomes"]["infra_error"]:
        return EXIT_INFRA, None
    if fail_under is not None and (failed := gate_failure(summary, fail_under, gate)):
        return EXIT_GATE, failed
    return 0, None


def external_server(request: RunRequest, agent: Agent) -> ExternalServer | None:
    """--mcp-server / --mcp-server-url as an ExternalServer, refused where it cannot apply."""
    if request.mcp_server is None and request.mcp_server_url is None:
        return None
    external = ExternalServer(request.mcp_server, request.mcp_server_url)
    external.preflight()
    if not agent.needs_mcp:
        raise UsageError(f"agent {agent.name} does not use MCP tools, so --mcp-server gives it nothing",
                         fix="use an MCP-driven agent: scripted, command, claude or codex")
    if tuple(request.tools) != DEFAULT_TOOLSETS:
        raise UsageError("--tools chooses among cu-run's own tools; an external MCP server brings its own",
                         fix="leave out --tools with --mcp-server")
    return external


def not_tamper_proof(tasks: tuple[Task, ...]) -> list[str]:
    """The tasks whose agent gets admin rights: it could tamper with its own verification."""
    return [t.id for t in tasks if t.spec.agent_privileges == "admin"]


def check_scripts(tasks: tuple[Task, ...]) -> None:
    """What `tasks lint` checks of every script, before any VM starts."""
    problems = [f"{p.path}: {p.message}" for t in tasks for p in errors(lint_task_scripts(t.folder))]
    if problems:
        raise UsageError("the tasks' scripts have errors:\n  " + "\n  ".join(problems),
                         fix="fix them (cu-run tasks lint --suite ... lists them all)")


def gate_failure(summary: dict, fail_under: float, gate: str) -> str | None:
    """Why the run misses --fail-under, or None. gate 'stable' leaves the flaky tasks out."""
    overall = summary["overall"]
    gated = overall if gate == "all" else overall["stable"]
    rate = gated["rate"] or 0
    if rate >= fail_under:
        return None
    which = "success rate" if gate == "all" else \
        f"success rate of the stable tasks (flaky left out: {', '.join(overall['flaky_tasks']) or 'none'})"
    return f"{which} {gated['rate']} is under --fail-under {fail_under}"


def validate_suite(settings: Settings, request: RunRequest, console: Console) -> tuple[int, list[str]]:
    """Oracle then nop over the suite: every oracle must pass and every nop must fail."""
    base = (request.out or Path("runs") / f"validate-{Path(request.suite).name}-{datetime.now(UTC):%Y%m%dT%H%M%S}")
    problems: list[str] = []
    results = {}
    for agent, expected in (("oracle", "pass"), ("nop", "fail")):
        sub = RunRequest(**{**request.__dict__, "agent": agent, "out": base / agent, "fail_under": None})
        results[agent] = run_suite(settings, sub, console)
        for r in results[agent].records:
            if r.outcome != expected:
                problems.append(f"{r.task_id} trial {r.trial}: {agent} gave {r.outcome}"
                                f"{' (' + r.reason + ')' if r.reason else ''}, expected {expected}")
    infra = any(r.exit_code == EXIT_INFRA for r in results.values())
    if problems:
        console.print("[bold red]validation failed:[/]\n  " + "\n  ".join(escape(p) for p in problems))
    else:
        console.print(f"[green]valid:[/] every oracle passed and every nop failed ({base})")
    code = EXIT_INFRA if infra else (EXIT_GATE if problems else 0)
    return code, problems


def _profile(suite: Suite, tasks: tuple[Task, ...]) -> str:
    profiles = {t.spec.profile for t in tasks}
    if len(profiles) != 1:
        raise UsageError(f"suite {suite.name} mixes profiles ({', '.join(sorted(profiles))}); run them separately")
    return profiles.pop()


def _check_out_dir(out_dir: Path, log: ResultLog, resume: bool, suite: Suite) -> dict | None:
    has_results = (out_dir / RESULTS).exists()
    if has_results and not resume:
        raise UsageError(f"{out_dir} already holds results of a run",
                         fix="add --resume to finish that run, or choose another --out")
    if not resume:
        return None
    run_json = out_dir / "run.json"
    if not run_json.exists():
        return None
    previous = json.loads(run_json.read_text())
    if previous.get("suite", {}).get("content_sha256") != suite.content_hash():
        raise UsageError(f"the tasks of suite {suite.name} changed since the run in {out_dir} started; "
                         "its results would mix two versions",
                         fix="start a new run with another --out")
    return previous


def _arguments(request: RunRequest) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in request.__dict__.items()}


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)


def _status_table(harness: Harness) -> Table:
    table = Table("slot", "task", "trial", "phase", "elapsed", title="episodes in flight")
    now = time.monotonic()
    for slot, s in sorted(harness.status.items()):
        table.add_row(str(slot), escape(s.task_id) or "-", str(s.trial or "-"), s.phase, f"{now - s.since:.0f} s")
    return table


_STYLE = {"pass": "green", "fail": "red", "timeout": "yellow", "agent_error": "magenta",
          "verifier_error": "bold magenta", "infra_error": "bold red"}


def print_record(console: Console, r: EpisodeRecord) -> None:
    # The reason may quote what the guest printed: it is text, never markup.
    reason = f" {escape(r.reason)}" if r.reason else ""
    console.print(f"[{_STYLE[r.outcome]}]{r.outcome:>14}[/] {escape(r.task_id)} #{r.trial} "
                  f"({'' if r.host == LOCAL_HOST else r.host + ' '}slot {r.slot}, {r.duration_s:.0f} s){reason}", highlight=False)


def _print_summary(console: Console, summary: dict) -> None:
    table = Table("task", "passes/scored", "rate [95% CI]", "checkpoints", "violations", "timeout", "agent_error",
                  "verifier_error", "infra_error")
    for task_id, c in list(summary["tasks"].items()) + [("overall", summary["overall"])]:
        o = c["outcomes"]
        rate = "-" if c["rate"] is None else f"{c['rate']:.2f} [{c['wilson95'][0]:.2f}, {c['wilson95'][1]:.2f}]"
        if c.get("flaky"):
            rate += " flaky"
        progress = "-" if c["checkpoint_progress"] is None else f"{c['checkpoint_progress']:.2f}"
        table.add_row(escape(task_id), f"{c['passes']}/{c['scored']}", rate, progress, str(c["violations"]),
                      str(o["timeout"]), str(o["agent_error"]), str(o["verifier_error"]), str(o["infra_error"]))
    console.print(table)
    overall = summary["overall"]
    for task_id, trials in overall.get("task_defects", {}).items():
        console.print(f"[bold magenta]task defect:[/] {escape(task_id)}: its verifier could not decide "
                      f"({escape('; '.join(trials))}); left out of the rate", highlight=False)
    if overall.get("not_tamper_proof_tasks"):
        console.print("[yellow]not tamper-proof:[/] the agent had admin rights in "
                      + ", ".join(map(escape, overall["not_tamper_proof_tasks"])), highlight=False)
