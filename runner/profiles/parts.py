"""The parts a guest profile is made of: one small interface each, its contract written here once.

Every guest has a way in (ShellAccess) and a way to run a task's scripts (TaskScripts): without
them no task can run. Every other part is optional, and the code that uses one asks the profile
for it (GuestProfile.part, GuestProfile.needs) and does without it, or says what is missing:

    WarmUp          what a VM made ready ahead of its episode runs first
    WriteSetLister  the write set's listing (runner.profiles.listing, where it is defined)
    Quarantine      stopping the agent's processes before verification
    ExecAudit       what the desktop user's processes ran, for `ran:` rules
    NetworkEnd      a networked episode's guest end
    FileTools       the MCP server's file tools, confined to a folder
    Probes          the conformance checks (runner.vm.selfcheck)
    ScriptLint      what `tasks lint` says of a task script in this guest's language

A new guest writes the parts it has (runner.profiles.base.GuestProfile puts them together).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from runner.guest.base import GuestShell
    from runner.guest.qga import AgentLink
    from runner.profiles.manifest import ImageFiles, ManifestFields

# setup: before the agent; verify: a verifier, checkpoint or safety check; collect: an imported
# benchmark's collector, whose postconfig may have the user's apps write (runner.benchmarks).
Phase = Literal["setup", "verify", "collect"]

# What the MCP file tools' scripts answer besides success, and what it means for the agent.
FILE_TOOL_ERRORS = {3: "does not exist", 4: "leads outside {root}", 5: "is not a file", 6: "is over 10 MiB"}

# How a staged_run_script says that staging itself failed, before the task's script ran.
STAGING_FAILED = "cu-run: could not stage the task's files"
STAGING_FAILED_EXIT = 125


@dataclass(frozen=True)
class DesktopUser:
    """The account the desktop runs as, which the agent acts as."""

    name: str
    home: str


@dataclass(frozen=True)
class ShellEndpoint:
    """How a person reaches a VM's user shell: `vm up --json` prints DETAILS under KIND."""

    kind: str  # ssh, winrm
    details: dict[str, Any]
    how: str  # one line a person can follow


@dataclass(frozen=True)
class Shells:
    """The two ways into a guest: as the desktop user (the agent's rights) and as the admin
    (what decides the score)."""

    user: GuestShell
    admin: GuestShell


@dataclass(frozen=True)
class DesktopProbe:
    """What the click and typing conformance checks need to see input arrive inside the guest:
    a terminal on the desktop to type into, and scripts that read back what arrived."""

    terminal_point: tuple[int, int]  # a click here focuses the desktop's terminal
    terminal_focus: str  # the focused window's title or app while the terminal has the focus
    pointer_script: str  # prints X=<x> and Y=<y> of the guest's pointer, one per line
    empty_point: tuple[int, int]  # a stretch of bare desktop
    scratch: tuple[str, str]  # two paths the typing check may write to


class Part(ABC):  # the kinds below are its subclasses; GuestProfile sorts parts by them
    """One part of a guest profile; LABEL names it in errors ("has no LABEL")."""

    label: ClassVar[str]


class ShellAccess(Part):
    """How the runner reaches a guest of an image: its shells, its user's home. Required."""

    label = "shell access"
    # How long a cold boot may take until the shell answers (a restore was saved running and gets
    # the runner's own limit, runner.vm.episode.SHELL_READY_TIMEOUT).
    boot_shell_timeout: float = 240.0

    @abstractmethod
    def home(self, user: str) -> str:
        """The desktop user's home folder in the guest."""

    @abstractmethod
    def access_problem(self, manifest: ManifestFields) -> str | None:
        """What is missing from an image manifest of this profile (how the runner reaches it), or None."""

    @abstractmethod
    def admin_access_missing(self, manifest: ManifestFields) -> str | None:
        """Why the runner cannot reach the image's admin account, or None."""

    @abstractmethod
    def shell_port(self, manifest: ManifestFields) -> int:
        """The guest port the runner's shells listen on."""

    @abstractmethod
    def open_shells(self, image: ImageFiles, host: str, port: int, agent: AgentLink | None = None) -> Shells:
        """The user's and the admin's shell of a VM of IMAGE whose shell port is forwarded to HOST:PORT.
        AGENT reaches the VM's QEMU guest agent, which a profile may use for the admin's shell
        when the image runs one (ImageManifest.qemu_agent)."""

    @abstractmethod
    def endpoint(self, image: ImageFiles, host: str, port: int) -> ShellEndpoint:
        """How a person reaches the user's shell."""


class TaskScripts(Part):
    """The guest's script language and how a task's scripts run in it. Required."""

    label = "task scripts"
    script_ext: str  # of task scripts: ".sh", ".ps1"
    admin_task_dir: str  # where privileged scripts and their files are staged
    agent_task_dir: str  # where the oracle's files are staged

    @abstractmethod
    def privileged_prelude(self, folder: str, user: DesktopUser, phase: Phase) -> str:
        """What runs before a setup, verify, checkpoint or safety script in the admin's shell:
        USER_HOME, DESKTOP_USER and TASK_DIR set, the working folder / (or the guest's system
        folder), never one the agent can write."""

    @abstractmethod
    def agent_prelude(self, folder: str) -> str:
        """What runs before the oracle in the user's shell: TASK_DIR set, the user's home entered."""

    @abstractmethod
    def stage_script(self, folder: str, subfolders: list[str]) -> str:
        """Makes FOLDER afresh (and SUBFOLDERS in it), readable by the shell's own account alone;
        fails (non-zero exit) when it cannot."""

    @abstractmethod
    def remove_script(self, folder: str) -> str:
        """Removes FOLDER and what it holds; never fails."""

    @abstractmethod
    def staged_path(self, folder: str, relative: str) -> str:
        """The guest path of a task file RELATIVE (with '/') staged in FOLDER."""

    def chained_script(self, first: str, boundary: str, second: str) -> str | None:
        """One command: FIRST; if it succeeded, BOUNDARY on a line of its own, then SECOND, whose
        exit code is the command's (FIRST's when it failed). None: this guest runs them apart."""
        return None

    def staged_run_script(self, folder: str, files: dict[str, bytes], script: str, after: str = "") -> str | None:
        """One command that stages FILES (relative path -> content) in FOLDER made afresh, runs
        SCRIPT from there with its output and exit code as its own, then AFTER (whatever SCRIPT
        did, exit included), then removes FOLDER; None when this guest stages by copying each file
        (stage_script, then GuestShell.put).

        Staging that fails exits STAGING_FAILED_EXIT with STAGING_FAILED on stderr."""
        return None

    @abstractmethod
    def verdict_helper(self, record: str) -> str:
        """Defines the verdict helper for a verify, checkpoint or safety script (runner.scoring.verdict):
        `verdict pass` / `verdict fail REASON` (PowerShell: `Verdict`) records the verdict at RECORD
        (in the admin's staging folder) and ends the script. A fail, once recorded, stands."""

    def verdict_trailer(self, record: str, boundary: str) -> str:
        """For staged_run_script's AFTER: when the helper recorded a verdict, prints a line break,
        BOUNDARY on a line of its own, then "pass", or "fail", a line break and the reason (bounded).
        Nothing for a guest that stages apart (verdict_read_script reads the record then)."""
        return ""

    @abstractmethod
    def verdict_read_script(self, record: str) -> str:
        """Prints what the helper recorded ("pass", or "fail", a line break and the reason), or
        nothing: for guests that run scripts apart from staging (staged_run_script None)."""

    @abstractmethod
    def hand_home_script(self, user: DesktopUser) -> str:
        """Gives what the admin made in the user's home to the user."""

    @abstractmethod
    def grant_admin_script(self, user: DesktopUser) -> str:
        """Gives the desktop user admin rights (tasks with agent_privileges: admin)."""

    @abstractmethod
    def clock_script(self, now: float) -> str:
        """Sets the guest's clock to NOW (seconds since the epoch), run by the admin."""

    @abstractmethod
    def sync_script(self) -> str:
        """Flushes the guest's disk buffers (before a warm state is saved), run by the admin."""

    @abstractmethod
    def quote_arguments(self, args: Sequence[str]) -> str:
        """ARGS as words of one command line in this guest's shell."""


class WarmUp(Part):
    """What a VM made ready ahead of its episode runs first, so that an episode's admin commands
    (staging, the lister) find what they run at hand."""

    label = "warm-up"

    @abstractmethod
    def script(self) -> str:
        """An admin script that runs those commands with nothing of any task."""


class Quarantine(Part):
    """Stops the desktop user's processes before verification (runner.scoring.quarantine)."""

    label = "quarantine"
    # True: the desktop user's processes present before the agent are spared by default
    # (no way to freeze a whole session without tearing it down).
    spares_earlier_processes: bool = False

    @abstractmethod
    def processes_script(self, user: DesktopUser) -> str:
        """Prints the user's processes, whitespace-separated, each as PID:START (its start time in
        the guest's own unit), so that a PID reused for another process is another process."""

    @abstractmethod
    def quarantine_script(self, user: DesktopUser, keep: frozenset[str] | None) -> str:
        """Stops the user's processes before verification: all of them (KEEP None), or all but KEEP
        (processes_script's words), which must be left able to run. Prints what it did; exits
        non-zero when it could not."""


class ExecAudit(Part):
    """What the desktop user's processes run, logged by the guest where the user cannot write,
    and read after the stop (runner.scoring.exec_audit): the evidence of `ran:` rules."""

    label = "exec audit"
    log_path: str  # the log, as the guest names it
    # The filesystem the host reads the log from (runner/scoring/ext4_reader.py) with the guest's
    # filesystems frozen; None: read through the admin channel (read_script).
    disk_filesystem: str | None = None

    @abstractmethod
    def mark_script(self, nonce: str) -> str:
        """Just before the agent's turn: prints "offset N" (the log's size now), "running 1" (0:
        the logger is not running) and "lost N" (the records the guest's kernel has dropped so
        far), and puts the marker carrying NONCE into the log, after which every program logged
        ran in the turn. Exits non-zero when it cannot."""

    @abstractmethod
    def end_script(self, nonce: str) -> str:
        """After the stop: puts the end marker carrying NONCE into the log and waits, bounded, until
        the log holds it; prints "running" and "lost" as mark_script."""

    @abstractmethod
    def read_script(self, offset: int, max_bytes: int) -> str:
        """Prints the log from byte OFFSET, at most MAX_BYTES of it, as base64."""


class NetworkEnd(Part):
    """A networked episode's guest end (runner/network/carriers.py)."""

    label = "network end"
    # Names this guest's apps ask for on their own whatever the task (a browser's account check):
    # the proxy refuses them like any other, and logs them "background", not as the agent's violation.
    background: tuple[str, ...] = ()

    @abstractmethod
    def start_script(self, forwarder: bytes, ca_cert: bytes, user: DesktopUser, proxy_port: int) -> str:
        """The admin script that starts the guest end: FORWARDER's code listening for the host's
        carriers and on 127.0.0.1:PROXY_PORT for applications, CA_CERT trusted where applications
        read it, the proxy set for USER's applications."""

    def warm_script(self, forwarder: bytes) -> str | None:
        """The admin script that readies what the warm state keeps of the guest end, run before the
        state is saved (runner.vm.warming): FORWARDER's code loaded, listening on nothing, for
        start_script to wake. None: nothing is kept, start_script starts it all."""
        return None


class FileTools(Part):
    """The MCP server's file tools, confined to a root folder."""

    label = "file tools"

    @abstractmethod
    def confine(self, root: str, path: str) -> str:
        """ROOT joined with PATH, normalised; raises ValueError when it leads outside ROOT."""

    @abstractmethod
    def list_files_script(self, root: str, target: str) -> str:
        """Lists TARGET (inside ROOT): type, size, modified, name per line; exits as FILE_TOOL_ERRORS says."""

    @abstractmethod
    def read_file_script(self, root: str, target: str, max_bytes: int) -> str:
        """Prints TARGET's bytes as base64; exits as FILE_TOOL_ERRORS says."""


class Probes(Part):
    """What the conformance checks (runner.vm.selfcheck) run in the guest."""

    label = "conformance probes"
    desktop_probe: DesktopProbe | None = None  # None: the click and typing checks cannot run here

    @abstractmethod
    def selfcheck_probe(self) -> tuple[str, str]:
        """A command that succeeds and the text its output must hold."""

    @abstractmethod
    def selfcheck_failing(self) -> str:
        """A command that prints 'to-stderr' on stderr and exits 3."""

    @abstractmethod
    def selfcheck_sleep(self) -> tuple[str, str]:
        """A command that sleeps 60 s, and one that prints the PIDs of such sleepers still running."""

    @abstractmethod
    def selfcheck_hash(self, path: str) -> str:
        """A command printing the lower-case sha256 of PATH first on its output."""

    @abstractmethod
    def selfcheck_temp_path(self) -> str:
        """A writable path in the guest for the file round trip."""

    @abstractmethod
    def typing_line(self, text: str, path: str) -> str:
        """A command line that, typed into the desktop's terminal, writes TEXT and a newline to PATH."""

    @abstractmethod
    def read_text_script(self, path: str) -> str:
        """Prints PATH's text, or nothing when it does not exist yet."""

    @abstractmethod
    def count_items_script(self, folder: str) -> str:
        """Prints how many files and folders FOLDER holds, all the way down (run by the admin):
        the scale of the walks over the user's home (hand-home, the write set)."""


class ScriptLint(Part):
    """What `tasks lint` says of a task's scripts in this guest's language. Best effort, never executed."""

    label = "script lint"

    @abstractmethod
    def script_paths(self, text: str) -> list[str]:
        """The guest paths a task script names as literals, the home as "~" (what an oracle
        touches must be allowed by the write set)."""

    def privileged_script_mistakes(self, text: str) -> list[str]:
        """What a privileged script's text (setup, verify, a check) gets wrong, as it runs as the
        admin: the desktop user's things named as the admin's own."""
        return []

    def verdict_warnings(self, text: str) -> list[str]:
        """What a verify, checkpoint or safety script's text does wrong with its verdict: verdicts
        printed on stdout (the older contract), above all with data in the verdict line, which
        agent text can forge (runner.scoring.verdict)."""
        return []

    def live_state_reads(self, text: str) -> list[str]:
        """For a task verified with the desktop alive (desktop_in_verify): each line of a verify,
        checkpoint or safety script that asks a running program (the display, the session bus,
        the process table, the user's own programs) rather than reading files. What ran before
        the agent is kept running then, so what it answers could be what the agent made it say."""
        return []
