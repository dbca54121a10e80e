"""The implementation behind cu_run's public names (cu_run/__init__.py): runs, validation, one
VM by hand, and what runs left. The CLI (runner.cli) calls these, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from rich.console import Console

from runner.choices import AccelChoice, StartChoice, chosen
from runner.config import Settings
from runner.display.base import Display
from runner.vm.episode import Endpoints, EpisodeVM
from runner.errors import UsageError
from runner.guest.base import GuestShell
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.runs.pool import PoolOpener
from runner.runs.request import RunOptions, RunRequest
from runner.records.results import EpisodeRecord
from runner.runs.run import RunResult

if TYPE_CHECKING:
    from runner.audit.run import AuditResult

def run_request(suite: str, agent: str, **options: Unpack[RunOptions]) -> RunRequest:
    """A RunRequest from the CLI's options by their flat names (vm_pool, trials, out, model, ...:
    runner.runs.request.RunOptions). TAGS: a task must have one of them; EXCLUDE_TAGS: none.
    An unknown option is refused (TypeError), a choice that is not one (accel, start, gate) too
    (UsageError)."""
    return RunRequest.of(suite, agent, **options)


def run(suite: str, agent: str, *, cache_dir: str | Path | None = None, libvirt_uri: str | None = None,
        console: Console | None = None, **options: Unpack[RunOptions]) -> RunResult:
    """Runs AGENT over SUITE, as `cu-run run` does, and returns what it came to (its folder,
    summary, records and the exit code the CLI would give). OPTIONS: see RunOptions. CONSOLE:
    where progress goes [default: stderr]."""
    from runner.runs.run import run_suite

    request = RunRequest.of(suite, agent, **options)
    return run_suite(_settings(cache_dir, libvirt_uri), request, console or Console(stderr=True),
                     pool_opener(request))


@dataclass(frozen=True)
class Validation:
    """What `validate` found: its folder (oracle/ and nop/ in it), the problems, the exit code."""

    out_dir: Path
    problems: list[str]
    exit_code: int

    @property
    def sound(self) -> bool:
        return self.exit_code == 0 and not self.problems


def validate(suite: str, *, cache_dir: str | Path | None = None, libvirt_uri: str | None = None,
             console: Console | None = None, **options: Unpack[RunOptions]) -> Validation:
    """Proves SUITE sound, as `cu-run validate` does: the oracle passes every task, the nop agent
    fails every one. OPTIONS: as for run (no agent: validate chooses them)."""
    from datetime import UTC, datetime

    from runner.runs.run import validate_suite

    out = options.get("out")
    options["out"] = out_dir = (Path(out) if out is not None
                                else Path("runs") / f"validate-{Path(suite).name}-{datetime.now(UTC):%Y%m%dT%H%M%S}")
    request = RunRequest.of(suite, "oracle", **options)
    code, problems = validate_suite(_settings(cache_dir, libvirt_uri), request, console or Console(stderr=True),
                                    pool_opener(request))
    return Validation(out_dir, problems, code)


def audit(suite: str, attacks: str = "all", *, quick: str | Path | None = None, cache_dir: str | Path | None = None,
          libvirt_uri: str | None = None, console: Console | None = None, **options: Unpack[RunOptions]) -> AuditResult:
    """Runs the audit's ATTACKS (comma-separated names, "all", or MODULE:CLASS of your own) against
    every task of SUITE, as `cu-run audit` does (docs/audit.md), with the oracle and nop controls
    (or, with QUICK, those of a validate folder). OPTIONS: as for validate."""
    from runner.audit.attacks import attack_agents
    from runner.audit.run import audit_suite

    request = RunRequest.of(suite, "nop", **options)
    return audit_suite(_settings(cache_dir, libvirt_uri), request, attack_agents(attacks),
                       console or Console(stderr=True), Path(quick) if quick is not None else None,
                       pool_opener(request))


@dataclass(frozen=True)
class McpEndpoint:
    """cu-run's MCP tools for one VM, served over streamable HTTP on 127.0.0.1."""

    url: str
    token: str  # send as Authorization: Bearer <token>
    trajectory: Path | None  # trajectory.jsonl, when a folder was given


@dataclass
class VM:
    """One episode VM opened by open_vm: its screen, its two shells, its endpoints."""

    episode: EpisodeVM
    _settings: Settings = field(repr=False)

    @property
    def name(self) -> str:
        return self.episode.name

    @property
    def display(self) -> Display:
        """The screen, mouse and keyboard (VNC): screenshot(), click(), type(), key(), ..."""
        return self.episode.display

    @property
    def user_shell(self) -> GuestShell:
        """The desktop user's shell: what an agent's commands get."""
        return self.episode.shell

    @property
    def admin_shell(self) -> GuestShell:
        """The admin channel (root; Windows' verifier account), out of the desktop user's reach."""
        return self.episode.admin_shell

    @property
    def endpoints(self) -> Endpoints:
        """The VNC address and password, and how to reach the user's shell from outside."""
        assert self.episode.endpoints is not None
        return self.episode.endpoints

    @contextmanager
    def serve_mcp(self, toolsets: tuple[str, ...] = DEFAULT_TOOLSETS, trajectory: str | Path | None = None,
                  file_root: str | None = None) -> Iterator[McpEndpoint]:
        """cu-run's MCP tools (TOOLSETS: screen, mouse, keyboard, files, accessibility) for this VM,
        each call recorded in TRAJECTORY/trajectory.jsonl, until the block ends."""
        from runner.mcp.http import HttpMcpServer
        from runner.mcp.session import vm_server
        from runner.mcp.trajectory import Trajectory

        recorded = Trajectory(Path(trajectory) if trajectory is not None else None)
        with HttpMcpServer(vm_server(self.episode, recorded, toolsets=tuple(toolsets), file_root=file_root)) as http:
            yield McpEndpoint(http.url, http.token, recorded.path)


@contextmanager
def open_vm(image: str = "linux-test", *, accel: str = "auto", start: str = "auto",
            cache_dir: str | Path | None = None, libvirt_uri: str | None = None,
            artifacts: str | Path | None = None) -> Iterator[VM]:
    """One episode VM of IMAGE, as `cu-run vm up` starts it (warm when it can), removed with its
    overlay however the block ends. ARTIFACTS: a folder for its logs and screens on an error."""
    from runner.runs.session import open_vm as open_episode_vm

    settings = _settings(cache_dir, libvirt_uri)
    with open_episode_vm(settings, image, chosen(AccelChoice, accel, "accel"), start=chosen(StartChoice, start, "start"),
                         artifacts=Path(artifacts) if artifacts is not None else None) as episode:
        yield VM(episode, settings)


@dataclass(frozen=True)
class RunResults:
    """What a run's folder holds: run.json (provenance), summary.json, and the latest record of
    each episode."""

    folder: Path
    run: dict
    summary: dict | None  # None while the run has not finished
    records: list[EpisodeRecord]

    def rate(self, task_id: str) -> float | None:
        """TASK_ID's success rate over its scored episodes, or None with none scored."""
        task = (self.summary or {}).get("tasks", {}).get(task_id)
        return None if task is None else task.get("rate")


def read_results(run_dir: str | Path) -> RunResults:
    """A run's folder (the --out of run, or one of validate's oracle/ and nop/)."""
    from runner.records.compare import load_records
    from runner.records.report import read_json

    folder = Path(run_dir)
    records = load_records(folder)  # refuses a folder that is not a run's, saying what it is
    summary_path = folder / "summary.json"
    return RunResults(folder, read_json(folder / "run.json"),
                      read_json(summary_path) if summary_path.is_file() else None, records)


@dataclass(frozen=True)
class Comparison:
    """Run B against run A, per task and overall (cu-run compare)."""

    label_a: str
    label_b: str
    tasks: list[dict]  # task, a, b, delta, p_value, beyond_noise
    overall: dict  # a, b, mean_task_delta, ci95, beyond_noise
    warnings: list[str]  # what makes the runs differ beyond their agents
    data: dict = field(repr=False)  # the whole comparison, as `cu-run compare --json` prints it

    @property
    def beyond_noise(self) -> bool:
        return bool(self.overall["beyond_noise"])


def compare(run_a: str | Path, run_b: str | Path) -> Comparison:
    """The change in success from RUN_A to RUN_B: Fisher's exact test per task, a paired
    bootstrap over tasks overall."""
    from runner.records.compare import compare_runs

    data = compare_runs(Path(run_a), Path(run_b))
    return Comparison(data["label_a"], data["label_b"], data["tasks"], data["overall"], data["warnings"], data)


def pool_opener(request: RunRequest) -> PoolOpener:
    """Where REQUEST's episodes go: this machine's slots, or (request.where.cluster) the cluster's hosts."""
    return pool_opener_for(request.where.cluster)


def pool_opener_for(cluster: str | None) -> PoolOpener:
    """This machine's slots, or the hosts of the cluster at CLUSTER. Chosen here, above the run,
    so a run never imports the cluster (runner.runs.pool)."""
    if cluster:
        from runner.cluster.driver import open_cluster_pool

        return open_cluster_pool
    from runner.runs.local_pool import open_local_pool

    return open_local_pool


def _settings(cache_dir: str | Path | None, libvirt_uri: str | None) -> Settings:
    if cache_dir is not None and not str(cache_dir).strip():
        raise UsageError("cache_dir is empty", fix="pass a folder, or leave it out for the default")
    return Settings.resolve(Path(cache_dir) if cache_dir is not None else None, libvirt_uri)
