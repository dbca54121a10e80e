"""Task suites as data: a suite is a folder of task folders, each with task.yaml and scripts.

    <suite>/<task-id>/task.yaml     id, instruction, profile, timeout_s, tags, difficulty
    <suite>/<task-id>/setup.<ext>   optional: puts the guest in a known state
    <suite>/<task-id>/verify.<ext>  last non-empty stdout line: PASS, or FAIL <reason>
    <suite>/<task-id>/oracle.<ext>  solves the task, proving it solvable and the verifier right
    <suite>/<task-id>/checkpoints/<name>.<ext>   optional, listed in task.yaml: partial progress,
                                    same PASS/FAIL contract as verify
    <suite>/<task-id>/safety/<name>.<ext>        optional, listed in task.yaml: PASS when the agent
                                    did not do what it must not (e.g. obey a planted instruction)
    <suite>/safety.yaml             optional: trajectory rules for every task of the suite
    <suite>/suite.yaml              optional: defaults for every task (clock, network)
    <suite>/cassettes.json          optional: the cassettes `cu-run assets cassettes` kept for the
                                    suite's networked tasks, by sha256 in the asset store

<ext> is the profile's: .sh (linux, run by sh) or .ps1 (windows, PowerShell). Any other
file in the folder travels into the guest with the scripts ($TASK_DIR / $env:TASK_DIR).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from runner.config import DATA_ROOT
from runner.errors import UsageError
from runner.network.policy import Origin, Refused, normalized_name
from runner.profiles import PROFILES, GuestProfile, get_profile

SUITES_DIR = DATA_ROOT / "tasks"
REQUIRED_SCRIPTS = ("verify", "oracle")
DISK_SCORED_SCRIPTS = ("oracle",)  # and verify.py, run on the host (runner.scoring.disk_verifier)
# An imported task is scored on the host from what its collector gathers; its oracle is ours,
# written where one can be (runner.benchmarks.oracles), so it may have none.
HOST_SCORED_SCRIPTS = ("collect",)
UPSTREAM_FILE = "upstream.json"
SUITE_SAFETY = "safety.yaml"
SUITE_DEFAULTS = "suite.yaml"
SUITE_CASSETTES = "cassettes.json"
STORED = re.compile(r"^sha256:[0-9a-f]{64}$")  # a cassette named by its hash, kept in the asset store
IMAGE_REFERENCE = re.compile(r"^([a-z0-9][a-z0-9.-]*(:[0-9]+)?/)?[a-z0-9][a-z0-9._/-]*"  # [registry[:port]/]name
                             r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")  # [:tag][@digest]



SCRIPT_NAME = r"^[a-z0-9][a-z0-9-]*$"


def inside_the_task(path: str, what: str) -> str:
    """PATH, a path of the task's network block, when it names something inside the task's folder."""
    if path.startswith("/") or ".." in Path(path).parts:
        raise ValueError(f"{what} inside the task's folder")
    return path


class ServiceSpec(BaseModel):
    """A local server for the episode, reached from the guest by NAME through the proxy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="the name the guest asks for (http://NAME/)")
    serve: str | None = Field(default=None, description="a folder of the task, served read-only over HTTP")
    image: str | None = Field(default=None, description="or a container image, run by the host's docker or podman")
    port: int = Field(default=80, gt=0, lt=65536, description="the image's HTTP port, inside its container")
    ready: str = Field(default="/", description="the path that answers once the image's server is up")

    @field_validator("image")
    @classmethod
    def _an_image_reference(cls, value: str | None) -> str | None:
        # It becomes an argument of the engine's command line: an option ("--privileged") is no image.
        if value is not None and not IMAGE_REFERENCE.match(value):
            raise ValueError(f"{value!r} is not an image reference (name[:tag][@digest])")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> ServiceSpec:
        if (self.serve is None) == (self.image is None):
            raise ValueError("a service gives serve: (a folder of the task) or image: (a container image), one of them")
        if not self.ready.startswith("/"):
            raise ValueError("ready: is a path, starting with /")
        return self

    @field_validator("name")
    @classmethod
    def _a_name(cls, value: str) -> str:
        try:
            return normalized_name(value)
        except Refused as exc:
            raise ValueError(str(exc)) from None

    @field_validator("serve")
    @classmethod
    def _inside(cls, value: str | None) -> str | None:
        return inside_the_task(value, "a folder") if value is not None else None


class NetworkSpec(BaseModel):
    """A task's network: without this block the guest has none. With it, the guest's only way out
    is its episode's proxy, which lets it reach ALLOW and SERVICES, by name, and nothing else."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: tuple[str, ...] = Field(default=(), description="origins the guest may reach: https://example.com")
    services: tuple[ServiceSpec, ...] = Field(default=(), description="local servers, reached by name")
    replay: str | None = Field(default=None, description="what --net replay answers from: a cassette in the task's "
                                                         "folder, or sha256:HEX, one kept in the asset store "
                                                         "(cu-run assets cassettes). Default: the suite's cassettes.json")

    @field_validator("replay")
    @classmethod
    def _a_file_inside(cls, value: str | None) -> str | None:
        if value is None or STORED.match(value):
            return value
        return inside_the_task(value, "a file, or sha256:HEX of one in the asset store,")

    def host_only(self) -> tuple[str, ...]:
        """The task's paths that stay on the host: the services' folders and the cassette (what the
        guest may only reach through the proxy, never read)."""
        in_folder = self.replay if self.replay and not STORED.match(self.replay) else None
        return tuple(s.serve for s in self.services if s.serve) + ((in_folder,) if in_folder else ())

    @field_validator("allow")
    @classmethod
    def _origins(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for origin in value:
            try:
                Origin.parse(origin)
            except (ValueError, Refused) as exc:
                raise ValueError(str(exc)) from None
        return value

    def origins(self) -> tuple[str, ...]:
        """ALLOW, and each service's own origins: http:// and https:// (the proxy's certificate)."""
        return self.allow + tuple(f"{scheme}://{s.name}" for s in self.services for scheme in ("http", "https"))


class WriteSetSpec(BaseModel):
    """Which folders are watched for changes the agent was not asked to make."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    watch: tuple[str, ...] | None = Field(default=None, description="roots to watch; default: the profile's")
    allow: tuple[str, ...] = Field(default=(), description="paths the task may change (globs, ~ = home)")
    ignore: tuple[str, ...] = Field(default=(), description="more churn to ignore, beside the profile's")

    @field_validator("watch", "allow", "ignore")
    @classmethod
    def _inside(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        # A pattern climbing out with '..' would allow (or hide) what lies outside the watched folders.
        for pattern in value or ():
            if ".." in re.split(r"[/\\]", pattern):
                raise ValueError(f"{pattern!r} climbs out with '..'; write the path it means")
        return value


class SafetyRule(BaseModel):
    """One thing the agent must never do, checked over its trajectory (ran: over the guest's
    exec audit). Exactly one of typed / ran / keys / click_region / allowed_tools says what."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=SCRIPT_NAME)
    description: str = ""
    typed: str | None = Field(default=None, description="regular expression over the text the agent typed")
    ran: str | None = Field(default=None, description="regular expression over each program the desktop user's "
                                                      "processes ran in the agent's turn, as "
                                                      "`FILE ARGUMENTS [(as NAME)] (in FOLDER)`")
    keys: tuple[str, ...] | None = Field(default=None, description="key combinations, e.g. alt+f4, ctrl+alt+delete")
    click_region: tuple[int, int, int, int] | None = Field(default=None, description="x, y, width, height")
    allowed_tools: tuple[str, ...] | None = Field(default=None, description="any other tool is a violation")

    @model_validator(mode="after")
    def _one_kind(self) -> SafetyRule:
        kinds = [k for k in RULE_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"rule {self.id!r} needs exactly one of {', '.join(RULE_KINDS)} "
                             f"(has {', '.join(kinds) or 'none'})")
        for kind in ("typed", "ran"):
            try:
                re.compile(getattr(self, kind) or "")
            except re.error as exc:
                raise ValueError(f"rule {self.id!r}: {kind} is not a valid regular expression: {exc}") from None
        return self

    @property
    def kind(self) -> str:
        return next(k for k in RULE_KINDS if getattr(self, k) is not None)


RULE_KINDS = ("typed", "ran", "keys", "click_region", "allowed_tools")


class SourceSpec(BaseModel):
    """Where an imported task comes from: its benchmark's file, kept verbatim as upstream.json."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bench: str = Field(description="osworld, waa")
    version: str = Field(description="the benchmark's commit or version")
    path: str = Field(description="the task file inside the benchmark's tree")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="of upstream.json")
    upstream_id: str = Field(description="the id the benchmark gives the task")


class TaskSpec(BaseModel):
    """task.yaml, validated. Unknown fields are refused so a typo is not silently ignored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="equal to the task's folder name")
    instruction: str = Field(min_length=1, description="the only thing the agent sees")
    profile: str = Field(description="the guest profile (runner.profiles): linux, windows")
    image: str | None = Field(default=None, description="the catalog image the task runs on; default: the "
                                                          "profile's (linux-test, windows-11)")
    timeout_s: int = Field(default=300, gt=0, le=24 * 3600, description="the agent's wall-clock limit")
    verify_timeout_s: int = Field(default=180, gt=0, le=3600,
                                  description="the wall-clock limit of the verifier, each checkpoint and each safety "
                                              "check; one that runs past it gives no verdict")
    tags: tuple[str, ...] = ()
    difficulty: Literal["easy", "medium", "hard"] | None = None
    checkpoints: tuple[str, ...] = Field(default=(), description="names of checkpoints/<name> scripts, in order")
    write_set: WriteSetSpec = WriteSetSpec()
    safety: tuple[SafetyRule, ...] = Field(default=(), description="trajectory rules for this task")
    safety_checks: tuple[str, ...] = Field(default=(), description="names of safety/<name> scripts")
    agent_privileges: Literal["user", "admin"] = Field(
        default="user", description="admin: the agent gets admin rights in the guest; it could then tamper with "
                                    "its own verification, so the task's scores are marked not tamper-proof")
    desktop_in_verify: bool = Field(
        default=False, description="the verifier needs the desktop session running: instead of freezing all of "
                                   "the desktop user's processes, only those started during the episode are killed")

    scoring: Literal["verifier", "host", "disk"] = Field(
        default="verifier", description="host: an imported task, scored on the host by its benchmark's own metric "
                                        "on what collect.<ext> gathers (runner.benchmarks); disk: verify.py "
                                        "judges disk_files as the guest's disk held them after the stop, on the "
                                        "host (runner.scoring.disk_verifier)")
    disk_files: tuple[str, ...] = Field(
        default=(), description="scoring: disk: the guest paths verify.py reads (~ is the desktop user's home), "
                                "read from the disk after the stop, links followed, folders whole")
    source: SourceSpec | None = Field(default=None, description="an imported task's upstream file")
    excluded: tuple[str, ...] = Field(default=(), description="why the task cannot run here: runs leave it out")
    network: NetworkSpec | None = Field(
        default=None, description="the guest's network: none without it (docs/network.md)")
    clock: datetime | None = Field(
        default=None, description="a frozen clock: the guest's time is set to this instant (with its timezone, "
                                  "e.g. 2026-01-15T10:00:00Z) at the start of every episode and runs on from there; "
                                  "host-side scoring sees it too. Default: the suite's (suite.yaml), else the host's")
    fidelity: tuple[str, ...] = Field(default=(), description="where this guest differs from the benchmark's")

    @model_validator(mode="after")
    def _host_scoring_has_source(self) -> TaskSpec:
        if self.scoring == "host" and self.source is None:
            raise ValueError("scoring: host needs the task's source (an imported task's upstream.json)")
        if self.scoring == "disk" and not self.disk_files:
            raise ValueError("scoring: disk needs disk_files: the paths verify.py reads")
        if self.disk_files and self.scoring != "disk":
            raise ValueError("disk_files is read for scoring: disk only")
        return self

    @field_validator("disk_files")
    @classmethod
    def _guest_paths(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for path in value:
            if not (path.startswith("/") or path == "~" or path.startswith("~/")) or ".." in path.split("/"):
                raise ValueError(f"{path!r}: a disk file is an absolute guest path or one under ~, without '..'")
        return value

    @field_validator("checkpoints", "safety_checks")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not re.match(SCRIPT_NAME, name):
                raise ValueError(f"{name!r} is not a script name (lower-case letters, digits, dashes)")
        if len(set(value)) != len(value):
            raise ValueError("names must be unique")
        return value

    @field_validator("clock")
    @classmethod
    def _instant(cls, value: datetime | None) -> datetime | None:
        return instant(value) if value is not None else None

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        if value not in PROFILES:
            raise ValueError(f"must be one of {', '.join(PROFILES)}")
        return value

    @field_validator("instruction")
    @classmethod
    def _strip(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be blank")
        return value


@dataclass(frozen=True)
class Task:
    spec: TaskSpec
    folder: Path

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def ext(self) -> str:
        return self.guest.scripts.script_ext

    @property
    def guest(self) -> GuestProfile:
        return get_profile(self.spec.profile)

    def script(self, kind: str) -> Path | None:
        path = self.folder / f"{kind}{self.ext}"
        return path if path.is_file() else None

    def files(self) -> list[Path]:
        """Every file that travels into the guest with the scripts (checked by task_files when loaded):
        not task.yaml, and nothing its network keeps on the host (a service's folder, a cassette)."""
        kept = [self.folder / p for p in self.spec.network.host_only()] if self.spec.network else []
        if self.spec.scoring == "disk":  # runs on the host: the guest never holds it
            kept.append(self.folder / "verify.py")
        return sorted(p for p in self.folder.rglob("*") if p.is_file() and p.name != "task.yaml"
                      and not any(p == k or k in p.parents for k in kept))


@dataclass(frozen=True)
class TagFilter:
    """--tags and --exclude-tags. Each --tags is a comma-separated list a task must have one of;
    given several times, a task must pass each. --exclude-tags: a task has none of them."""

    include: tuple[tuple[str, ...], ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.include and not self.exclude

    def matches(self, task: Task) -> bool:
        have = set(task.spec.tags)
        return all(have & set(group) for group in self.include) and not have & set(self.exclude)

    def describe(self) -> str:
        parts = [f" with a tag of {' or '.join(group)}" for group in self.include]
        parts += [f" without {', '.join(self.exclude)}"] if self.exclude else []
        return ",".join(parts)


@dataclass(frozen=True)
class Suite:
    name: str
    folder: Path
    tasks: tuple[Task, ...]
    safety: tuple[SafetyRule, ...] = ()  # safety.yaml: rules for every task

    def select(self, ids: list[str] | None, tags: TagFilter | None = None) -> tuple[Task, ...]:
        """The tasks IDS names, in that order; without IDS every task that can run here (none
        with `excluded` reasons) that TAGS lets through."""
        tags = tags or TagFilter()
        if not ids:
            chosen = tuple(t for t in self.tasks if not t.spec.excluded and tags.matches(t))
            if not chosen:
                raise UsageError(f"suite {self.name} has no task to run{tags.describe()}",
                                 fix=f"cu-run tasks list --suite {self.folder} shows its tasks, tags and exclusions")
            return chosen
        if not tags.empty:
            raise UsageError("--tasks names the tasks; --tags and --exclude-tags choose them", fix="give one way")
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise UsageError(f"--tasks names {', '.join(map(repr, twice))} more than once",
                             fix="name each task once; --trials runs a task several times")
        known = {t.id: t for t in self.tasks}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise UsageError(f"suite {self.name} has no task {', '.join(map(repr, unknown))}",
                             fix=f"known tasks: {', '.join(known)}")
        excluded = [f"{i}: {'; '.join(known[i].spec.excluded)}" for i in ids if known[i].spec.excluded]
        if excluded:
            raise UsageError("these tasks cannot run here:\n  " + "\n  ".join(excluded),
                             fix="leave them out of --tasks")
        return tuple(known[i] for i in ids)

    def excluded_tasks(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.spec.excluded)

    def content_hash(self) -> str:
        """A hash of every file of every task: the suite's identity in a run's provenance."""
        digest = hashlib.sha256()
        for name in (SUITE_SAFETY, SUITE_DEFAULTS):
            if (self.folder / name).is_file():
                digest.update(name.encode() + b"\0" + (self.folder / name).read_bytes() + b"\0")
        for task in self.tasks:
            _hash_folder(digest, task.folder, self.folder)
        return digest.hexdigest()

    def task_hashes(self) -> dict[str, str]:
        """A hash of each task's files, by id: what tells which tasks changed since a selection."""
        hashes = {}
        for task in self.tasks:
            digest = hashlib.sha256()
            _hash_folder(digest, task.folder, self.folder)
            hashes[task.id] = digest.hexdigest()
        return hashes


def _hash_folder(digest, folder: Path, root: Path) -> None:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")


def resolve_suite_path(name_or_path: str) -> Path:
    """A built-in suite name (tasks/<name>) or a path to a suite folder."""
    candidate = Path(name_or_path)
    if candidate.is_dir():
        return candidate.resolve()
    built_in = SUITES_DIR / name_or_path
    if "/" not in name_or_path and built_in.is_dir():
        return built_in
    names = ", ".join(sorted(p.name for p in SUITES_DIR.iterdir() if p.is_dir())) if SUITES_DIR.is_dir() else "none"
    raise UsageError(f"no suite {name_or_path!r}: not a folder, and not a built-in suite ({names})",
                     fix="pass a built-in suite name or the path of a folder of tasks")


def load_suite(name_or_path: str) -> Suite:
    """Loads and checks every task; every task's problem is raised at once, each naming its file and field."""
    folder = resolve_suite_path(name_or_path)
    task_dirs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not task_dirs:
        raise UsageError(f"suite folder {folder} holds no task folders")
    tasks, problems = [], []
    for task_dir in task_dirs:
        try:
            tasks.append(load_task(task_dir))
        except UsageError as exc:
            problems.append(exc.message)
    if problems:
        raise UsageError(f"suite {folder.name} has {len(problems)} broken task{'s' if len(problems) > 1 else ''}:\n  "
                         + "\n  ".join(problems), fix=f"fix them: cu-run tasks lint --suite {name_or_path} checks the rest too")
    defaults, recorded = load_suite_defaults(folder), load_suite_cassettes(folder)
    return Suite(folder.name, folder, tuple(with_cassette(defaults.apply(t), recorded) for t in tasks),
                 load_suite_rules(folder))


class SuiteDefaults(BaseModel):
    """suite.yaml: what every task of the suite gets unless its task.yaml says otherwise."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    clock: datetime | None = Field(default=None, description="the tasks' frozen clock (TaskSpec.clock)")
    network: NetworkSpec | None = Field(
        default=None, description="the network of each task without its own block (its allow only: services "
                                  "and cassettes are a task's own)")

    @field_validator("clock")
    @classmethod
    def _instant(cls, value: datetime | None) -> datetime | None:
        return instant(value) if value is not None else None

    @field_validator("network")
    @classmethod
    def _allow_only(cls, value: NetworkSpec | None) -> NetworkSpec | None:
        if value is not None and (value.services or value.replay):
            raise ValueError("a suite's network gives allow only: services and replay belong to a task's own block")
        return value

    def apply(self, task: Task) -> Task:
        update: dict[str, object] = {}
        if self.clock is not None and task.spec.clock is None:
            update["clock"] = self.clock
        if self.network is not None and task.spec.network is None:
            update["network"] = self.network
        return Task(task.spec.model_copy(update=update), task.folder) if update else task


def load_suite_cassettes(folder: Path) -> dict[str, str]:
    """cassettes.json: {task id: sha256:HEX}, what `cu-run assets cassettes` kept for the suite."""
    path = folder / SUITE_CASSETTES
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text())["cassettes"]
        if not isinstance(found, dict) or not all(isinstance(v, str) and STORED.match(v) for v in found.values()):
            raise ValueError("each task's cassette is sha256:HEX")
        return {str(k): v for k, v in found.items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{path} is not a list of kept cassettes ({exc})",
                         fix="keep them again: cu-run assets cassettes RUN_DIR --assets DIR") from None


def with_cassette(task: Task, recorded: dict[str, str]) -> Task:
    """TASK replaying from its suite's kept cassette, when its own network block names none."""
    network = task.spec.network
    if network is None or network.replay is not None or task.id not in recorded:
        return task
    return Task(task.spec.model_copy(update={"network": network.model_copy(update={"replay": recorded[task.id]})}),
                task.folder)


def instant(value: datetime) -> datetime:
    """VALUE in UTC; a time without its timezone is refused, since it would mean another instant on
    every host (pydantic reads "2026-01-15T10:00:00Z" and "+01:00" offsets)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("give the instant with its timezone, e.g. 2026-01-15T10:00:00Z")
    return value.astimezone(UTC)


def load_suite_defaults(folder: Path) -> SuiteDefaults:
    path = folder / SUITE_DEFAULTS
    if not path.is_file():
        return SuiteDefaults()
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of defaults (clock, network)")
    try:
        return SuiteDefaults.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: {_describe(exc)}") from exc


def load_suite_rules(folder: Path) -> tuple[SafetyRule, ...]:
    path = folder / SUITE_SAFETY
    if not path.is_file():
        return ()
    data = _read_yaml(path)
    if not isinstance(data, list):
        raise UsageError(f"{path}: expected a list of rules ({{id, typed|keys|click_region|allowed_tools}})")
    rules = []
    for number, item in enumerate(data, 1):
        try:
            rules.append(SafetyRule.model_validate(item))
        except ValidationError as exc:
            raise UsageError(f"{path}: rule {number}: {_describe(exc)}") from exc
    return tuple(rules)


def load_task(folder: Path) -> Task:
    path = folder / "task.yaml"
    if not path.is_file():
        raise UsageError(f"{path}: missing; every task folder needs a task.yaml")
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of fields (id, instruction, profile, ...), got {type(data).__name__}")
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise UsageError(f"{path}: {_describe(exc)}") from exc
    if spec.id != folder.name:
        raise UsageError(f"{path}: field 'id' is {spec.id!r} but the folder is {folder.name!r}; they must be equal")
    task = Task(spec, folder)
    check_task_files(folder)
    required = {"host": HOST_SCORED_SCRIPTS, "disk": DISK_SCORED_SCRIPTS}.get(spec.scoring, REQUIRED_SCRIPTS)
    for kind in required:
        if task.script(kind) is None:
            raise UsageError(f"{folder}: missing script {kind}{task.ext} (a {spec.scoring}-scored task of profile "
                             f"{spec.profile} needs {', '.join(k + task.ext for k in required)})")
    if spec.scoring == "disk" and not (folder / "verify.py").is_file():
        raise UsageError(f"{folder}: missing verify.py, which judges a disk-scored task's files on the host")
    if spec.scoring == "host" and not (folder / UPSTREAM_FILE).is_file():
        raise UsageError(f"{folder}: missing {UPSTREAM_FILE}, the benchmark's task file its score comes from",
                         fix="import the task again: cu-run tasks import")
    for kind, names in (("checkpoints", spec.checkpoints), ("safety", spec.safety_checks)):
        for name in names:
            if task.script(f"{kind}/{name}") is None:
                raise UsageError(f"{path}: lists {kind} script {name!r} but {folder / kind / (name + task.ext)} "
                                 "is missing")
    return task


MAX_FILE_BYTES = 50 * 2**20  # one file that travels with a task
MAX_TASK_BYTES = 200 * 2**20  # all of them


def check_task_files(folder: Path) -> None:
    """What travels into the guest must be regular files inside the task folder, of bounded size:
    no link out of it, no FIFO (reading one would hang), no device."""
    total = 0
    root = folder.resolve()
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(root):
                raise UsageError(f"{path}: a link out of the task folder (to {target}); copy the file in instead")
        mode = path.stat().st_mode if path.exists() else 0
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            raise UsageError(f"{path}: not a regular file (a FIFO, device, socket or dangling link); remove it")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: {size / 2**20:.0f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB a task's file may be")
        total += size
        if total > MAX_TASK_BYTES:
            raise UsageError(f"{folder}: the task's files are over {MAX_TASK_BYTES // 2**20} MiB together")


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without anchors and aliases: a task file never needs them, and a 'billion laughs'
    of nested aliases would turn a small file into a gigantic value."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in task files",
                                              event.start_mark)
        return super().compose_node(parent, index)


def _read_yaml(path: Path) -> object:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start} is {path.read_bytes()[exc.start]:#04x})",
                         fix="save the file as UTF-8") from None
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader without aliases
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from exc


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _describe(exc: ValidationError) -> str:
    """Pydantic's errors in a task author's words: the field, what it should be, what it got, and
    for an unknown field the known one it is probably a misspelling of."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(file)"
        got = error.get("input")
        if error["type"] == "extra_forbidden":
            known = _known_fields(exc.title, error["loc"])
            guess = difflib.get_close_matches(str(error["loc"][-1]), known, n=1)
            problems.append(f"field '{where}' is not a field here" + (f": did you mean '{guess[0]}'?" if guess else
                                                                         f" (known: {', '.join(known)})"))
            continue
        shown = f" (got {_short(got)})" if error["type"] != "missing" and not isinstance(got, dict) else ""
        problems.append(f"field '{where}': {_plain(error['msg'])}{shown}")
    return "; ".join(problems)


_PLAIN = (("Value error, ", ""), ("Input should be a valid tuple", "should be a list"),
          ("Input should be a valid list", "should be a list"), ("Input should be a valid integer", "should be a whole number"),
          ("Input should be a valid string", "should be text"), ("Input should be", "should be"),
          ("Field required", "is required"), ("String should match pattern", "should match"))


def _plain(message: str) -> str:
    for pydantic_words, ours in _PLAIN:
        message = message.replace(pydantic_words, ours)
    return message


def _known_fields(model_title: str, loc: tuple) -> list[str]:
    """The fields of the model a misspelt field sits in (top level of task.yaml, or a nested block)."""
    model: type[BaseModel] = {"TaskSpec": TaskSpec}.get(model_title, TaskSpec)
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None) if field else None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            break
    return sorted(model.model_fields)
