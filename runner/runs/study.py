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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticUndefined
from rich.console import Console

from runner.choices import AccelChoice, StartChoice
from runner.config import Settings, private_dir
from runner.errors import UsageError
from runner.records.compare import compare_runs
from runner.runs.local_pool import open_local_pool
from runner.runs.pool import PoolOpener
from runner.runs.request import Command, RunRequest, option_named, options_for
from runner.runs.run import EXIT_INFRA, OpenRun, run_planned, write_json
from runner.runs.run_plan import plan_run

STUDY_JSON = "study.json"
ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def study_field(name: str) -> Any:
    """A study file's field for the run option NAME, with the table's default, range and help
    (runner.runs.request.RUN_OPTIONS): where the study file takes the option as the request types it."""
    row = option_named(name)
    return Field(default=PydanticUndefined if row.required else row.default, ge=row.at_least, le=row.at_most,
                 description=row.help)


class Arm(BaseModel):
    """An arm of a study: its name, and the run options the table gives an arm (under their study
    keys), each to the arm's run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=ARM_NAME)
    agent: str = study_field("agent")
    tools: tuple[str, ...] | None = None  # cu-run's own server's tool sets; None: its default ones
    mcp_server: str | None = study_field("mcp_server")
    mcp_server_url: str | None = study_field("mcp_server_url")
    append_system_prompt: str | None = None  # a file holding the appended prompt, relative to the study file
    max_turns: int = study_field("max_turns")
    timeout_s: int | None = study_field("timeout_s")
    max_steps: int | None = study_field("max_steps")
    agent_cmd: str | None = study_field("agent_cmd")
    agent_script: str = study_field("agent_script")
    env: dict[str, str] = Field(default_factory=dict)  # the agent's environment

    @model_validator(mode="after")
    def _one_server(self) -> Arm:
        if self.mcp_server and self.mcp_server_url:
            raise ValueError(f"arm {self.name}: give mcp_server or mcp_server_url, not both")
        if self.tools is not None and (self.mcp_server or self.mcp_server_url):
            raise ValueError(f"arm {self.name}: tools choose among cu-run's own tools; an external server brings its own")
        return self


class StudyFile(BaseModel):
    """A study file: the run options the table gives a study file's top level, and the arms."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str = study_field("suite")
    tasks: tuple[str, ...] | None = None  # or a selection
    selection: str | None = None  # a selection.yaml, relative to the study file
    trials: int = study_field("trials")
    vm_pool: int = study_field("vm_pool")
    image: str | None = study_field("image")
    accel: AccelChoice = study_field("accel")
    start: StartChoice = study_field("start")
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


def arm_request(study: Study, arm: Arm, out_dir: Path, resume: bool, options: Mapping[str, Any] | None = None) -> RunRequest:
    """ARM's run: the study file's options, the arm's, OPTIONS (the study command's own, by name) and
    its folder in OUT_DIR, read at the request's edge (RunRequest.of) as the CLI's and the API's are."""
    given = {**_keyed(study.spec, "study file"), **_keyed(arm, "arm"), **(options or {}),
             "out": out_dir / arm.name, "resume": resume}
    # What a study file spells its own way: paths relative to the file, a prompt's file, a mapping.
    suite = study.relative(study.spec.suite)
    given["suite"] = str(suite) if suite.is_dir() else study.spec.suite
    given["tasks"] = study.spec.tasks or ()
    given["selection"] = study.relative(study.spec.selection) if study.spec.selection else None
    given["append_prompt"] = _appended_prompt(study, arm)
    given["agent_env"] = tuple(sorted(arm.env.items()))
    if not arm.tools:  # none named: cu-run's default tool sets
        del given["tools"]
    return RunRequest.of(given.pop("suite"), given.pop("agent"), **given)


def _keyed(spec: BaseModel, command: Command) -> dict[str, Any]:
    """The options the table gives COMMAND (a study file's top level, or an arm), from SPEC by their study keys."""
    return {row.name: getattr(spec, row.study_key) for row in options_for(command)}


def _appended_prompt(study: Study, arm: Arm) -> str:
    if not arm.append_system_prompt:
        return ""
    prompt_file = study.relative(arm.append_system_prompt)
    try:
        return prompt_file.read_text()
    except OSError as exc:
        raise UsageError(f"arm {arm.name}: cannot read its append_system_prompt {prompt_file}: {exc.strerror}") from exc


def run_study(settings: Settings, path: Path, out: Path | None, resume: bool, console: Console,
              options: Mapping[str, Any] | None = None, open_pool: PoolOpener = open_local_pool) -> int:
    """Every arm planned (and so checked) before any VM starts, then run as one pool's runs
    (runner.runs.run.run_planned): interleaved on this machine's slots or a cluster's hosts, each
    arm's run folder written as `cu-run run` writes it; then the comparison."""
    study = load_study(path)
    out_dir = (out or Path("runs") / f"study-{path.stem}-{datetime.now(UTC):%Y%m%dT%H%M%S}").resolve()
    previous = _check_folder(out_dir, study, resume)
    planned = []
    for arm in study.spec.arms:
        request = arm_request(study, arm, out_dir, resume, options)
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
