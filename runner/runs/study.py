"""`cu-run study run STUDY.yaml`: arms of agents and MCP servers compared on one task list.

A study file names the suite and its tasks (inline, or a selection drawn by `tasks select`),
the trials, the VM pool and the arms: each an agent with its MCP server (cu-run's own with
its tool sets, or an external one), an appended system prompt, a turn limit, a timeout and
an environment. Every episode gets a fresh VM; the arms run interleaved (task by task, arm
by arm, on one pool) so drift on the host falls on all of them alike.

The result is one folder: study.json (the file, its sha256 and every arm's provenance), a
run folder per arm (DIR/<arm>/, as `cu-run run` writes it), and comparison.json: each arm
against the first, per task and overall, with the noise statistics `cu-run compare` uses.
`--resume` finishes a study without redoing an episode.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from rich.console import Console

from runner.choices import AccelChoice, StartChoice
from runner.config import Settings, private_dir
from runner.errors import UsageError
from runner.records.compare import compare_runs
from runner.runs.local_pool import open_local_pool
from runner.runs.pool import PoolOpener
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.runs.request import AgentSetup, HowToRun, ResultsTo, RunRequest, Where, Work
from runner.runs.run import EXIT_INFRA, OpenRun, run_planned, write_json
from runner.runs.run_plan import plan_run

STUDY_JSON = "study.json"
ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class Arm(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=ARM_NAME)
    agent: str
    tools: tuple[str, ...] | None = None  # cu-run's own server's tool sets
    mcp_server: str | None = None  # an external server's command, per episode ({vnc} filled in)
    mcp_server_url: str | None = None
    append_system_prompt: str | None = None  # a file, relative to the study file
    max_turns: int = Field(default=50, ge=1)
    timeout_s: int | None = Field(default=None, ge=1)
    max_steps: int | None = Field(default=None, ge=1)
    agent_cmd: str | None = None
    agent_script: str = "ui_oracle.yaml"
    env: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_server(self) -> Arm:
        if self.mcp_server and self.mcp_server_url:
            raise ValueError(f"arm {self.name}: give mcp_server or mcp_server_url, not both")
        if self.tools is not None and (self.mcp_server or self.mcp_server_url):
            raise ValueError(f"arm {self.name}: tools choose among cu-run's own tools; an external server brings its own")
        return self


class StudyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str
    tasks: tuple[str, ...] | None = None
    selection: str | None = None  # a selection.yaml, relative to the study file
    trials: int = Field(default=1, ge=1)
    vm_pool: int = Field(default=1, ge=1)
    image: str | None = None
    accel: AccelChoice = AccelChoice.auto
    start: StartChoice = StartChoice.auto
    arms: tuple[Arm, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> StudyFile:
        if (self.tasks is None) == (self.selection is None):
            raise ValueError("give the tasks inline (tasks: [...]) or a drawn selection (selection: FILE), one of them")
        names = [a.name for a in self.arms]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"arm names must differ: {', '.join(twice)} more than once")
        return self


@dataclass(frozen=True)
class Study:
    path: Path
    text: str
    spec: StudyFile

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def relative(self, name: str) -> Path:
        path = Path(name)
        return path if path.is_absolute() else self.path.parent / path


def load_study(path: Path) -> Study:
    try:
        text = path.read_text()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise UsageError(f"cannot read the study file {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping (suite, tasks or selection, trials, vm_pool, arms)")
    try:
        return Study(path.resolve(), text, StudyFile.model_validate(data))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"{path}: {problems}") from exc


def arm_request(study: Study, arm: Arm, out_dir: Path, resume: bool, where: Where | None = None) -> RunRequest:
    spec = study.spec
    prompt = ""
    if arm.append_system_prompt:
        prompt_file = study.relative(arm.append_system_prompt)
        try:
            prompt = prompt_file.read_text()
        except OSError as exc:
            raise UsageError(f"arm {arm.name}: cannot read its append_system_prompt {prompt_file}: {exc.strerror}") from exc
    return RunRequest(
        Work(str(study.relative(spec.suite)) if study.relative(spec.suite).is_dir() else spec.suite,
             tasks=tuple(spec.tasks or ()), trials=spec.trials, timeout_s=arm.timeout_s,
             selection=study.relative(spec.selection) if spec.selection else None),
        AgentSetup(arm.agent, agent_cmd=arm.agent_cmd, max_turns=arm.max_turns, agent_script=arm.agent_script,
                   append_prompt=prompt, agent_env=tuple(sorted(arm.env.items())), tools=arm.tools or DEFAULT_TOOLSETS,
                   max_steps=arm.max_steps, mcp_server=arm.mcp_server, mcp_server_url=arm.mcp_server_url),
        HowToRun(vm_pool=spec.vm_pool, image=spec.image, accel=spec.accel, start=spec.start),
        where or Where(),
        ResultsTo(out=out_dir / arm.name, resume=resume))


def run_study(settings: Settings, path: Path, out: Path | None, resume: bool, console: Console,
              where: Where | None = None, open_pool: PoolOpener = open_local_pool) -> int:
    """Every arm planned (and so checked) before any VM starts, then run as one pool's runs
    (runner.runs.run.run_planned): interleaved on this machine's slots or a cluster's hosts, each
    arm's run folder written as `cu-run run` writes it; then the comparison."""
    study = load_study(path)
    out_dir = (out or Path("runs") / f"study-{path.stem}-{datetime.now(UTC):%Y%m%dT%H%M%S}").resolve()
    previous = _check_folder(out_dir, study, resume)
    planned = []
    for arm in study.spec.arms:
        request = arm_request(study, arm, out_dir, resume, where)
        planned.append((plan_run(settings, request), request))
    private_dir(out_dir)

    def opened(runs: list[OpenRun]) -> None:
        _write_study_json(out_dir, study, list(zip(study.spec.arms, runs, strict=True)), previous)
        console.print(f"study {out_dir}: {sum(len(r.to_go) for r in runs)} episodes to go over {len(runs)} arms",
                      highlight=False)

    results = run_planned(settings, planned, console, open_pool, live_title=f"study {path.stem}",
                          live_dir=out_dir, opened=opened)
    codes = [r.exit_code for r in results]
    comparison = compare_arms(out_dir, [a.name for a in study.spec.arms])
    (out_dir / "comparison.json").write_text(json.dumps(comparison, indent=2) + "\n")
    (out_dir / "comparison.md").write_text(comparison_markdown(comparison))
    _print_comparison(console, comparison)
    return EXIT_INFRA if EXIT_INFRA in codes else max(codes)


def _check_folder(out_dir: Path, study: Study, resume: bool) -> dict | None:
    existing = out_dir / STUDY_JSON
    if existing.exists() and not resume:
        raise UsageError(f"{out_dir} already holds a study", fix="add --resume to finish it, or choose another --out")
    if not resume or not existing.exists():
        return None
    previous = json.loads(existing.read_text())
    if previous.get("sha256") != study.sha256:
        raise UsageError(f"the study file {study.path} changed since the study in {out_dir} started; "
                         "its arms would mix two designs", fix="start a new study with another --out")
    return previous


def _write_study_json(out_dir: Path, study: Study, arms: list[tuple[Arm, OpenRun]], previous: dict | None) -> None:
    now = datetime.now(UTC).isoformat()
    data = previous or {"started_at": now, "resumed_at": [], "file": str(study.path), "sha256": study.sha256,
                        "content": study.text}
    if previous:
        data["resumed_at"].append(now)
    data["arms"] = {arm.name: {**arm.model_dump(mode="json"), "run": arm.name,
                               "agent_version": run.provenance.get("agent", {}).get("version"),
                               "tasks": [t.id for t in run.plan.tasks]} for arm, run in arms}
    write_json(out_dir / STUDY_JSON, data)


def compare_arms(out_dir: Path, names: list[str]) -> dict:
    """Every arm against the first, per task and overall (runner.records.compare)."""
    base = names[0]
    return {"baseline": base, "against": {name: compare_runs(out_dir / base, out_dir / name) for name in names[1:]}}


def comparison_markdown(comparison: dict) -> str:
    """The comparison as a report a person reads: per arm against the first, per task and overall."""
    def side(c: dict | None) -> str:
        return "-" if c is None or c["rate"] is None else f"{c['passes']}/{c['scored']} ({c['rate']:.2f})"

    base = comparison["baseline"]
    lines = [f"# Study comparison: every arm against {base}", ""]
    for name, result in comparison["against"].items():
        o = result["overall"]
        lines += [f"## {name} against {base}", "", f"| task | {base} | {name} | change | p (Fisher) | beyond noise |",
                  "|---|---|---|---|---|---|"]
        for row in result["tasks"]:
            delta = "-" if row["delta"] is None else f"{row['delta']:+.2f}"
            p = "-" if row["p_value"] is None else f"{row['p_value']:.3f}"
            lines.append(f"| {row['task']} | {side(row['a'])} | {side(row['b'])} | {delta} | {p} | "
                         f"{'yes' if row['beyond_noise'] else 'no'} |")
        lines.append(f"| **overall** | {side(o['a'])} | {side(o['b'])} | {o['mean_task_delta']:+.2f} (mean per task) | "
                     f"95% CI [{o['ci95'][0]:+.2f}, {o['ci95'][1]:+.2f}] | {'yes' if o['beyond_noise'] else 'no'} |")
        lines += ["", f"Per task: {result['method']['task']}. Overall: {result['method']['overall']}.", ""]
    return "\n".join(lines)


def _print_comparison(console: Console, comparison: dict) -> None:
    for name, result in comparison["against"].items():
        o = result["overall"]
        verdict = "a difference beyond noise" if o["beyond_noise"] else "no difference beyond noise"
        console.print(f"{name} against {comparison['baseline']}: mean change per task {o['mean_task_delta']:+.2f}, "
                      f"95% CI [{o['ci95'][0]:+.2f}, {o['ci95'][1]:+.2f}]: {verdict}", highlight=False)
