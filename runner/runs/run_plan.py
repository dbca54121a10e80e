"""A run's plan: its request checked and resolved before any VM starts (the suite and its tasks,
the agent, the image, the run folder). Every refusal of bad input happens here, but for a single
option's (out of its range, a choice that is not one), which the request refuses as it is made
(runner.runs.request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from runner.agents.base import Agent
from runner.benchmarks import host_scoring
from runner.benchmarks.host_scoring import HostScoring
from runner.config import Settings
from runner.vm.episode import EPISODE_MIN_FREE_BYTES, check_free_space
from runner.errors import UsageError
from runner.images.builders import image_named
from runner.images.catalog import Catalog, Image
from runner.mcp.toolsets import TOOLSETS, resolve_toolsets
from runner.profiles import get_profile
from runner.profiles.parts import FileTools
from runner.runs.resume_check import resume_differences
from runner.choices import NetMode
from runner.network.settings import NetSettings
from runner.runs.episode_inputs import episode_tasks, external_server, net_settings, request_agent
from runner.runs.request import RunRequest, Where, Work
from runner.records.results import RESULTS, ResultLog
from runner.tasks.guest_parts import require_parts
from runner.tasks.lint import errors, lint_task_scripts
from runner.tasks.model import Suite, Task, load_suite
from runner.tasks.selection import load_selection


@dataclass(frozen=True)
class RunPlan:
    """What a run is, checked before any VM starts: every refusal of bad input happens here."""

    suite: Suite
    tasks: tuple[Task, ...]
    agent: Agent
    image: Image
    out_dir: Path
    previous: dict | None  # run.json of the run being resumed
    host_scoring: HostScoring | None = None  # imported tasks: their benchmark's metrics, the assets
    cassettes: dict[str, str] = field(default_factory=dict)  # --net replay: each networked task's cassette's sha256
    net: NetSettings = NetSettings()  # --net, the asset store, --net-hosts

    def planned(self, trials: int) -> list[tuple[str, int]]:
        return [(t.id, trial) for trial in range(1, trials + 1) for t in self.tasks]


def plan_run(settings: Settings, request: RunRequest) -> RunPlan:
    """REQUEST checked and resolved, each check handed the part of the request it reads (its options'
    ranges were checked as its parts were made: runner.runs.request)."""
    work, setup, how, where, results = request.work, request.agent, request.how, request.where, request.results
    check_live_options(where)
    suite = load_suite(work.suite)
    if work.selection is not None and work.tasks:
        raise UsageError("--tasks and --selection both choose the tasks", fix="give one of them")
    ids = load_selection(work.selection, suite) if work.selection is not None else list(work.tasks)
    tasks = suite.select(ids, work.tags)
    check_scripts(tasks)
    profile = _profile(suite, tasks)
    require_parts(tasks, suite.safety)
    if set(resolve_toolsets(setup.tools)) & set(TOOLSETS["files"]):
        get_profile(profile).needs(FileTools, "--tools files")  # refused here, not per episode after a boot
    tasks = episode_tasks(work, tasks)
    agent = request_agent(setup, tasks)
    external_server(setup, agent)
    image = image_named(Catalog(settings.images_dir),
                        how.image or named_image(suite, tasks) or get_profile(profile).default_image)
    if image.manifest.profile != profile:
        raise UsageError(f"suite {suite.name} is for {profile} guests but image {image.name} is {image.manifest.profile}",
                         fix=f"pass --image with a {profile} image")
    if (missing_admin := image.manifest.admin_access_missing()) is not None:
        raise UsageError(f"image {image.name}: {missing_admin}", fix=f"rebuild it: cu-run image build {image.name} --force")
    out_dir = (results.out or Path("runs") / f"{suite.name}-{agent.name}-{datetime.now(UTC):%Y%m%dT%H%M%S}").resolve()
    previous = _check_out_dir(out_dir, ResultLog(out_dir), results.resume, suite)
    if previous is not None and (differences := resume_differences(
            previous, request.arguments(), agent.name, image.manifest.disk_sha256, [t.id for t in tasks])):
        raise UsageError(f"--resume would add episodes unlike those of the run in {out_dir}:\n  "
                         + "\n  ".join(differences),
                         fix="resume with the run's own options (its run.json lists them), or start a new run "
                             "with another --out")
    check_free_space(settings.episodes_dir, how.vm_pool * EPISODE_MIN_FREE_BYTES,
                     f"a pool of {how.vm_pool} episode VMs")
    net = net_settings(how, work.assets)
    tasks, cassettes = _network_ready(settings, tasks, net, named=bool(work.tasks or work.selection))
    scoring = _host_scoring(settings, work, where, tasks)
    if scoring is not None:
        tasks = _scorable(scoring, tasks, named=bool(work.tasks or work.selection))
    return RunPlan(suite, tasks, agent, image, out_dir, previous, scoring, cassettes, net)


def _network_ready(settings: Settings, tasks: tuple[Task, ...], net: NetSettings,
                   named: bool) -> tuple[tuple[Task, ...], dict[str, str]]:
    """TASKS ready for their network (each on a guest with a network end: require_parts); in a
    replay, each with its cassette, else refused when NAMED (--tasks, --selection) and left out
    with a line when not; the proxy's venv made before any VM starts (once, from PyPI).
    Returns the tasks and the replay's cassettes' sha256 by task (run.json records them)."""
    networked = tuple(t for t in tasks if t.spec.network is not None)
    if not networked:
        return tasks, {}
    from runner.runs.episode_network import cassette_hashes

    runs_images = any(s.image for t in networked if t.spec.network for s in t.spec.network.services)
    if runs_images and net.mode != NetMode.replay:
        from runner.network.services import container_runtime

        container_runtime()  # a service's image needs the host's engine: said before any VM starts

    if net.mode == NetMode.replay and not named:
        missing = [t.id for t in networked if t.spec.network is not None and t.spec.network.replay is None]
        if missing:
            print(f"left out of the replay, as they have no cassette: {', '.join(missing)}", flush=True)
            tasks = tuple(t for t in tasks if t.id not in missing)
            networked = tuple(t for t in networked if t.id not in missing)
            if not tasks:
                raise UsageError("--net replay: no task of the run has a cassette", fix="record them with --net record, "
                                 "then keep them: cu-run assets cassettes RUN_DIR --assets DIR")
    cassettes = cassette_hashes(networked, net)  # each task's cassette there, or UsageError naming it
    from runner.network.proxy import proxy_env

    proxy_env(settings.cache_dir, say=lambda line: print(line, flush=True))
    return tasks, cassettes


def _host_scoring(settings: Settings, work: Work, where: Where, tasks: tuple[Task, ...]) -> HostScoring | None:
    """Imported tasks: their assets checked and the scoring env made, before any VM starts."""
    if where.cluster and any(t.spec.scoring == "host" for t in tasks):
        raise UsageError("imported tasks are scored on this machine's scoring env and asset store; a --cluster "
                         "run's episodes are on its hosts", fix="run them without --cluster")
    return host_scoring.prepare(settings.cache_dir, tasks, work.assets, work.evaluators, work.suite,
                                say=lambda line: print(line, flush=True))


def _scorable(scoring: HostScoring, tasks: tuple[Task, ...], named: bool) -> tuple[Task, ...]:
    """TASKS without those the scoring env cannot score: refused when named (--tasks, --selection),
    else left out with a line each."""
    cannot = host_scoring.unscorable(scoring, tasks)
    if not cannot:
        return tasks
    lines = [f"{task_id}: {'; '.join(reasons)}" for task_id, reasons in cannot.items()]
    if named:
        raise UsageError(f"these tasks cannot be scored with {scoring.env.version}:\n  " + "\n  ".join(lines),
                         fix="leave them out, or pass --evaluators with a checkout of the benchmark that has them")
    kept = tuple(t for t in tasks if t.id not in cannot)
    if not kept:
        raise UsageError(f"no task of the run can be scored with {scoring.env.version}:\n  " + "\n  ".join(lines))
    print(f"left out, as {scoring.env.version} cannot score them:\n  " + "\n  ".join(lines), flush=True)
    return kept


def check_live_options(where: Where) -> None:
    from runner.live import check_live_flags

    check_live_flags(where.live, where.live_port, where.live_host, where.live_control)
    if where.live and where.cluster:
        raise UsageError("--live serves the slots of this machine; a --cluster run's VMs are on its hosts",
                         fix="drop --live, or run without --cluster")


def not_tamper_proof(tasks: tuple[Task, ...]) -> list[str]:
    """The tasks whose agent gets admin rights: it could tamper with its own verification."""
    return [t.id for t in tasks if t.spec.agent_privileges == "admin"]


def check_scripts(tasks: tuple[Task, ...]) -> None:
    """What `tasks lint` checks of every script, before any VM starts."""
    problems = [f"{p.path}: {p.message}" for t in tasks for p in errors(lint_task_scripts(t.folder, t.guest))]
    if problems:
        raise UsageError("the tasks' scripts have errors:\n  " + "\n  ".join(problems),
                         fix="fix them (cu-run tasks lint --suite ... lists them all)")


def _profile(suite: Suite, tasks: tuple[Task, ...]) -> str:
    profiles = {t.spec.profile for t in tasks}
    if len(profiles) != 1:
        raise UsageError(f"suite {suite.name} mixes profiles ({', '.join(sorted(profiles))}); run them separately")
    return profiles.pop()


def named_image(suite: Suite, tasks: tuple[Task, ...]) -> str | None:
    """The image the tasks name (task.yaml's image), or None when none does."""
    named = {t.spec.image for t in tasks if t.spec.image}
    if len(named) > 1:
        raise UsageError(f"suite {suite.name}'s tasks name more than one image ({', '.join(sorted(named))})",
                         fix="run them separately, or pass --image")
    return named.pop() if named else None


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


