"""The linux profile: a Debian desktop reached over SSH, task scripts in sh, made of its parts.

The desktop user logs in with the image's client key; the admin is root, by a second key,
with a clean environment (env -i) and only system folders on its PATH. Privileged scripts
are staged in root's /run/cu-task (tmpfs, 0700); the agent's processes are frozen with the
cgroup v2 freezer before verification. The write-set lister is runner.profiles.linux_listing's,
what `tasks lint` says of sh is runner.profiles.linux_lint's.

What runs in the guest is files under guest_agent/linux, each saying in its header what it does,
when, as whom, and its parameters; the methods here fill those in (runner.guest.programs).
"""

from __future__ import annotations

import base64
import io
import json
import posixpath
import shlex
import tarfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runner.errors import InfraError
from runner.guest.programs import program_text, sh_program
from runner.guest.qga import AgentLink, QemuAgentShell
from runner.guest.ssh import SshShell
from runner.profiles.base import GuestProfile
from runner.profiles.linux_lint import LinuxScriptLint
from runner.profiles.linux_listing import LinuxLister
from runner.profiles.listing import Watch
from runner.profiles.parts import (
    STAGING_FAILED,
    STAGING_FAILED_EXIT,
    DesktopProbe,
    DesktopUser,
    ExecAudit,
    FileTools,
    NetworkEnd,
    Phase,
    Probes,
    Quarantine,
    ShellAccess,
    ShellEndpoint,
    Shells,
    TaskScripts,
    WarmUp,
)
from typing_extensions import override

if TYPE_CHECKING:
    from runner.profiles.manifest import ImageFiles, SshAccess

PROFILE_NAME = "linux"  # what an image's manifest and a task say to have this guest
# The display the images' desktop runs on (startx's default).
X_DISPLAY = "0"
# The admin channel's whole environment (env -i): no PATH entry a user can write to.
ADMIN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


# Chromium's own requests to Google's services (sign-in, sync, suggestions as one types, metrics,
# component updates, its clock check, its new tab page) would each be a request outside the
# allowed origins while the agent acts: a violation it did not commit. A networked episode's
# managed policy turns them off; none is a setting an imported task asks the agent to change.
CHROMIUM_QUIET: dict[str, bool | int | str] = {
    "BrowserSignin": 0, "SyncDisabled": True, "MetricsReportingEnabled": False, "SearchSuggestEnabled": False,
    "NetworkPredictionOptions": 2, "TranslateEnabled": False, "SpellCheckServiceEnabled": False,
    "UrlKeyedAnonymizedDataCollectionEnabled": False, "BackgroundModeEnabled": False,
    "ComponentUpdatesEnabled": False, "DomainReliabilityAllowed": False, "BrowserNetworkTimeQueriesEnabled": False,
    "NewTabPageLocation": "about:blank",  # the default one is the search engine's page, fetched
}
# What Chromium still asks for with those off, measured on linux-desktop (an idle minute and a
# half: its Google account check and its push-messaging check-in). Exact names: a search on
# www.google.com, or any other site, is still the agent's.
CHROMIUM_BACKGROUND = ("accounts.google.com", "android.clients.google.com")


class LinuxAccess(ShellAccess):
    """SSH as the desktop user; root over the QEMU guest agent where the image runs one, else SSH."""

    def __init__(self, homes: str = "/home") -> None:
        self.homes = homes  # the folder the users' homes are in

    @override
    def home(self, user: str) -> str:
        return f"{self.homes}/{user}"

    @override
    def access_problem(self, manifest) -> str | None:
        return None if manifest.ssh is not None else "a linux image needs 'ssh' (how the runner logs in)"

    @override
    def admin_access_missing(self, manifest) -> str | None:
        if manifest.ssh.admin_private_key is None:
            return "it predates the runner's privileged channel (no admin key in its manifest)"
        return None

    @override
    def shell_port(self, manifest) -> int:
        return _ssh(manifest).port

    @override
    def open_shells(self, image: ImageFiles, host: str, port: int, agent: AgentLink | None = None) -> Shells:
        ssh = _ssh(image.manifest)
        user = SshShell(host, port, ssh.user, image.path(ssh.private_key), ssh.host_key)
        if image.manifest.qemu_agent and agent is not None and ssh.admin_user == "root":
            # No login to wait for after a restore: the agent runs as root, ready in the saved state.
            return Shells(user=user, admin=QemuAgentShell(agent, environment=ADMIN_ENV,
                                                          workdir=ADMIN_ENV["HOME"]))
        if ssh.admin_private_key is None:
            raise InfraError(f"image {image.name} has no admin key", fix=f"cu-run image build {image.name} --force")
        return Shells(user=user, admin=SshShell(host, port, ssh.admin_user, image.path(ssh.admin_private_key),
                                                ssh.host_key, environment=ADMIN_ENV))

    @override
    def endpoint(self, image: ImageFiles, host: str, port: int) -> ShellEndpoint:
        ssh = _ssh(image.manifest)
        key = image.path(ssh.private_key)
        return ShellEndpoint("ssh", {"host": host, "port": port, "user": ssh.user, "key": str(key)},
                             f"ssh -i {key} -p {port} -o StrictHostKeyChecking=no {ssh.user}@{host}")


class LinuxScripts(TaskScripts):
    """sh, with each script's files staged and run in one command (guest_agent/linux: each file's
    header says what it does)."""

    script_ext = ".sh"

    def __init__(self, admin_task_dir: str = "/run/cu-task", agent_task_dir: str = "/tmp/.cu-oracle") -> None:
        self.admin_task_dir = admin_task_dir  # tmpfs, root's, 0700
        self.agent_task_dir = agent_task_dir

    @override
    def privileged_prelude(self, folder: str, user: DesktopUser, phase: Phase) -> str:
        return sh_program("linux/privileged-prelude.sh", TASK_DIR=folder, USER_HOME=user.home,
                          DESKTOP_USER=user.name, CU_RUN_PHASE=phase,
                          CU_RUN_READ_ONLY=program_text("linux/read-only-mounts.sh"))

    @override
    def agent_prelude(self, folder: str) -> str:
        return sh_program("linux/agent-prelude.sh", TASK_DIR=folder)

    @override
    def stage_script(self, folder: str, subfolders: list[str]) -> str:
        return sh_program("linux/stage.sh", arguments=[f"{folder}/{d}" for d in subfolders], FOLDER=folder)

    @override
    def remove_script(self, folder: str) -> str:
        return f"rm -rf {folder}"

    @override
    def chained_script(self, first: str, boundary: str, second: str) -> str:
        return sh_program("linux/chain.sh", CU_RUN_FIRST=first, CU_RUN_BOUNDARY=boundary, CU_RUN_SECOND=second)

    @override
    def staged_run_script(self, folder: str, files: dict[str, bytes], script: str, after: str = "") -> str:
        everything = {**files, RUN_FILE: script.encode()}
        folders = [f"{folder}/{d}" for d in sorted({posixpath.dirname(p) for p in everything} - {""})]
        # Text files travel as PATH TEXT words, for the shell's own printf; when one is binary, all
        # of them as a tar.
        text = _as_text(everything)
        if text is None:
            words, tar = [], base64.encodebytes(_tar(everything)).decode()
        else:
            words, tar = [w for path, content in sorted(text.items()) for w in (f"{folder}/{path}", content)], ""
        return sh_program("linux/staged-run.sh", arguments=[*words, *folders], CU_RUN_FOLDER=folder,
                          CU_RUN_SCRIPT=f"{folder}/{RUN_FILE}", CU_RUN_FOLDERS=len(folders), CU_RUN_TAR=tar,
                          CU_RUN_AFTER=after, CU_RUN_STAGING_FAILED=STAGING_FAILED,
                          CU_RUN_STAGING_FAILED_EXIT=STAGING_FAILED_EXIT)

    @override
    def verdict_helper(self, record: str) -> str:
        return sh_program("linux/verdict.sh", CU_RUN_VERDICT=record)

    @override
    def verdict_trailer(self, record: str, boundary: str) -> str:
        return sh_program("linux/verdict-record.sh", CU_RUN_VERDICT=record, CU_RUN_BOUNDARY=boundary,
                          CU_RUN_MAX_RECORD=MAX_RECORD)

    @override
    def verdict_read_script(self, record: str) -> str:
        return sh_program("linux/verdict-record.sh", CU_RUN_VERDICT=record, CU_RUN_BOUNDARY="",
                          CU_RUN_MAX_RECORD=MAX_RECORD)

    @override
    def staged_path(self, folder: str, relative: str) -> str:
        return f"{folder}/{relative}"

    @override
    def hand_home_script(self, user: DesktopUser) -> str:
        return sh_program("linux/hand-home.sh", USER_HOME=user.home, DESKTOP_USER=user.name)

    @override
    def grant_admin_script(self, user: DesktopUser) -> str:
        return sh_program("linux/grant-admin.sh", DESKTOP_USER=user.name)

    @override
    def quote_arguments(self, args: Sequence[str]) -> str:
        return shlex.join(args)

    @override
    def clock_script(self, now: float) -> str:
        return f"date -u -s @{now:.3f} >/dev/null"

    @override
    def sync_script(self) -> str:
        return "sync"


class LinuxWarmUp(WarmUp):
    """Staging and the lister, run once with nothing of any task: Python's and sh's files read
    from the disk while nobody waits."""

    def __init__(self, scripts: LinuxScripts, lister: LinuxLister) -> None:
        self.scripts = scripts
        self.lister = lister

    @override
    def script(self) -> str:
        folder = "/root/.cu-run-warm-up"
        return sh_program("linux/warm-up.sh",
                          CU_RUN_STAGED=self.scripts.staged_run_script(folder, {"warm-up": b"x"}, "true"),
                          CU_RUN_LISTING=self.lister.list_script(Watch((folder,), self.lister.default_ignore)))


class LinuxQuarantine(Quarantine):
    """The user's slice frozen with the cgroup v2 freezer (guest_agent/linux/quarantine.sh)."""

    @override
    def processes_script(self, user: DesktopUser) -> str:
        return sh_program("linux/processes.sh", DESKTOP_USER=user.name)

    @override
    def quarantine_script(self, user: DesktopUser, keep: frozenset[str] | None) -> str:
        # The file defines the quarantine's steps; the line after it runs the one the task asks for.
        return quarantine_steps(user, keep) + ("freeze_user\n" if keep is None else "kill_new\n")


class LinuxExecAudit(ExecAudit):
    """auditd's log of the programs run by the desktop user's processes (the image's
    /etc/audit/rules.d/cu-run.rules), read from the disk; guest_agent/linux/exec-audit.sh."""

    log_path = "/var/log/audit/audit.log"
    disk_filesystem = "ext4"

    @override
    def mark_script(self, nonce: str) -> str:
        return self._step("mark", nonce=nonce)

    @override
    def end_script(self, nonce: str) -> str:
        return self._step("end", nonce=nonce)

    @override
    def read_script(self, offset: int, max_bytes: int) -> str:
        return self._step("read", offset=offset, max_bytes=max_bytes)

    def _step(self, step: str, *, nonce: str = "", offset: int = 0, max_bytes: int = 0) -> str:
        return sh_program("linux/exec-audit.sh", CU_RUN_STEP=step, CU_RUN_NONCE=nonce, CU_RUN_LOG=self.log_path,
                          CU_RUN_OFFSET=offset, CU_RUN_MAX=max_bytes)


class LinuxNetworkEnd(NetworkEnd):
    """guest_agent/linux/network-start.sh: the forwarder (the warm state's, network-warm.sh, woken),
    the CA in the system store, the proxy set for the user's applications and Chromium's managed policy."""

    background = CHROMIUM_BACKGROUND

    @override
    def start_script(self, forwarder: bytes, ca_cert: bytes, user: DesktopUser, proxy_port: int) -> str:
        chromium_policy = json.dumps({"ProxyMode": "fixed_servers", "ProxyServer": f"127.0.0.1:{proxy_port}",
                                      **CHROMIUM_QUIET})
        return sh_program("linux/network-start.sh", FORWARDER=base64.b64encode(forwarder).decode("ascii"),
                          CA_CERT=base64.b64encode(ca_cert).decode("ascii"), USER_HOME=user.home,
                          DESKTOP_USER=user.name, PROXY=f"http://127.0.0.1:{proxy_port}",
                          CHROMIUM_POLICY=chromium_policy)

    @override
    def warm_script(self, forwarder: bytes) -> str:
        return sh_program("linux/network-warm.sh", FORWARDER=base64.b64encode(forwarder).decode("ascii"))


class LinuxFileTools(FileTools):
    @override
    def confine(self, root: str, path: str) -> str:
        root = posixpath.normpath(root)
        target = posixpath.normpath(posixpath.join(root, path))
        if target != root and not target.startswith(root + "/"):
            raise ValueError(f"{path} leads outside {root}")
        return target

    @override
    def list_files_script(self, root: str, target: str) -> str:
        return sh_program("linux/list-files.sh", ROOT=posixpath.normpath(root), TARGET=target)

    @override
    def read_file_script(self, root: str, target: str, max_bytes: int) -> str:
        return sh_program("linux/read-file.sh", ROOT=posixpath.normpath(root), TARGET=target, MAX_BYTES=max_bytes)


class LinuxProbes(Probes):
    # Where linux-test's .jwmrc puts the terminal (xterm -geometry 90x24+40+40), and bare
    # desktop right of it, above the tray.
    desktop_probe = DesktopProbe(terminal_point=(200, 150), terminal_focus="XTerm",
                                 pointer_script="DISPLAY=:0 xdotool getmouselocation --shell",
                                 empty_point=(1000, 500), scratch=("/tmp/typed", "/tmp/symbols"))

    @override
    def selfcheck_probe(self) -> tuple[str, str]:
        return "uname -a", "Linux"

    @override
    def selfcheck_failing(self) -> str:
        return "echo to-stderr >&2; exit 3"

    @override
    def selfcheck_sleep(self) -> tuple[str, str]:
        return "sleep 60", "pgrep -x sleep || true"

    @override
    def selfcheck_hash(self, path: str) -> str:
        return f"sha256sum {shlex.quote(path)}"

    @override
    def selfcheck_temp_path(self) -> str:
        return "/tmp/cu-roundtrip.bin"

    @override
    def typing_line(self, text: str, path: str) -> str:
        return f"cat > {shlex.quote(path)} <<'EOF'\n{text}\nEOF\n"

    @override
    def read_text_script(self, path: str) -> str:
        return f"cat {shlex.quote(path)} 2>/dev/null"

    @override
    def count_items_script(self, folder: str) -> str:
        return f"find {shlex.quote(folder)} -xdev -mindepth 1 | wc -l\n"


def linux_profile(name: str = PROFILE_NAME, *, access: ShellAccess | None = None,
                  scripts: LinuxScripts | None = None) -> GuestProfile:
    """The linux guest with all its parts; ACCESS and SCRIPTS in place of its own (a test's guest
    whose folders are a test's)."""
    scripts = scripts or LinuxScripts()
    lister = LinuxLister()
    return GuestProfile(name, default_image="linux-test", access=access or LinuxAccess(), scripts=scripts,
                        parts=(LinuxWarmUp(scripts, lister), lister, LinuxQuarantine(), LinuxExecAudit(),
                               LinuxNetworkEnd(), LinuxFileTools(), LinuxProbes(), LinuxScriptLint()))


def _ssh(manifest) -> SshAccess:
    """The image's SSH access; access_problem() refused an image without it when it was loaded."""
    if manifest.ssh is None:
        raise InfraError(f"image {manifest.name} has no SSH access in its manifest")
    return manifest.ssh


RUN_FILE = ".cu-run-script"  # the prelude and the task's script, in the staged folder
MAX_RECORD = 4096  # bytes of a recorded FAIL reason read back: it may hold agent data of any size


def _as_text(files: dict[str, bytes]) -> dict[str, str] | None:
    """FILES as text a shell word can carry (UTF-8, no NUL), or None when one is not."""
    try:
        text = {path: data.decode("utf-8") for path, data in files.items()}
    except UnicodeDecodeError:
        return None
    return None if any("\0" in t for t in text.values()) else text


def _tar(files: dict[str, bytes]) -> bytes:
    """A tar of FILES, owned by nobody in particular (extracted --no-same-owner), readable
    by the extracting account alone; folders made for nested paths."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folders = sorted({posixpath.dirname(p) for p in files} - {""})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o700
            tar.addfile(info)
        for path, data in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def quarantine_steps(user: DesktopUser, keep: frozenset[str] | None) -> str:
    """guest_agent/linux/quarantine.sh with its parameters: its steps defined, none run yet.
    KEEP: the processes desktop_in_verify keeps (None: the default quarantine, which keeps none)."""
    return sh_program("linux/quarantine.sh", DESKTOP_USER=user.name, USER_HOME=user.home,
                      KEEP=" ".join(sorted(keep or ())), X_DISPLAY=X_DISPLAY, X_SWEEP=program_text("linux/x_sweep.py"),
                      HIDE_FOLDERS=program_text("linux/hide_folders.py"))
