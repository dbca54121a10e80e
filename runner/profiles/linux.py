"""The linux profile: a Debian desktop reached over SSH, task scripts in sh.

The desktop user logs in with the image's client key; the admin is root, by a second key,
with a clean environment (env -i) and only system folders on its PATH. Privileged scripts
are staged in root's /run/cu-task (tmpfs, 0700); the agent's processes are frozen with the
cgroup v2 freezer before verification.

What runs in the guest is files under guest_agent/linux, each saying in its header what it does,
when, as whom, and its parameters; the methods here fill those in (runner.guest.programs).
"""

from __future__ import annotations

import base64
import io
import json
import posixpath
import re
import shlex
import tarfile
from collections.abc import Sequence
from typing import TYPE_CHECKING

from runner.errors import InfraError
from runner.guest.programs import program_text, python_command, sh_program
from runner.guest.qga import AgentLink, QemuAgentShell
from runner.guest.ssh import SshShell
from runner.profiles.base import (
    STAGING_FAILED,
    STAGING_FAILED_EXIT,
    DesktopProbe,
    DesktopUser,
    GuestProfile,
    Phase,
    ShellEndpoint,
    Shells,
)
from runner.profiles.listing import HASH_BUDGET_S, HASH_MAX_BYTES, MAX_ENTRIES, Entry, Listing, Watch
from typing_extensions import override

if TYPE_CHECKING:
    from runner.profiles.manifest import ImageFiles, SshAccess

# A verdict printed on stdout (the older contract), and one that carries data: an expansion
# after PASS/FAIL in the same echo or printf.
_STDOUT_VERDICT = re.compile(r"\b(echo|printf)\b[^;|&]*?['\"]?\b(PASS|FAIL)\b")
_FROM_COMMAND = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=[\"']?(?:\$\(|`)")
_READ = re.compile(r"\bread\b(?:\s+-[a-z]+)*((?:\s+[A-Za-z_][A-Za-z0-9_]*)+)")
_HOME_VAR = re.compile(r"\$HOME\b|\$\{HOME[}:]")
_TILDE = re.compile(r"(?<![\w/$])~/")
# Commands that ask a running program, not the disk: the X server, the session bus and what it
# starts, accessibility, the process table, and as_user (the user's own programs and settings).
_LIVE_STATE = re.compile(r"(?<![\w.-])(xdotool|xprop|xwininfo|wmctrl|xdpyinfo|xwd|xclip|xsel|dbus-send|gdbus|"
                         r"busctl|qdbus|xfconf-query|gsettings|dconf|pyatspi|pgrep|pidof|ps|as_user)(?![\w.-])")
# The display the images' desktop runs on (startx's default).
X_DISPLAY = "0"
# The admin channel's whole environment (env -i): no PATH entry a user can write to.
ADMIN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


# Chromium's own requests to Google's services (sign-in, sync, suggestions as one types, metrics,
# component updates, its clock check, its new tab page) would each be a request outside the
# allowed origins while the agent acts: a violation it did not commit. A networked episode's
# managed policy turns them off; none is a setting an imported task asks the agent to change.
CHROMIUM_QUIET = {
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


class LinuxProfile(GuestProfile):
    name = "linux"
    script_ext = ".sh"
    disk_filesystem = "ext4"  # the images' one filesystem, mkfs.ext4 on the whole disk
    default_image = "linux-test"
    default_watch = ("~",)
    default_ignore = ("~/.cache/**", "~/.local/**", "~/.config/**", "~/.bash_history", "~/.lesshst",
                      "~/.python_history", "~/.xsession-errors*", "~/.Xauthority", "~/.viminfo", "~/.dbus/**",
                      "~/.ssh/**")
    admin_task_dir = "/run/cu-task"  # tmpfs, root's, 0700
    agent_task_dir = "/tmp/.cu-oracle"
    # Where linux-test's .jwmrc puts the terminal (xterm -geometry 90x24+40+40), and bare
    # desktop right of it, above the tray.
    desktop_probe = DesktopProbe(terminal_point=(200, 150), terminal_focus="XTerm",
                                 pointer_script="DISPLAY=:0 xdotool getmouselocation --shell",
                                 empty_point=(1000, 500), scratch=("/tmp/typed", "/tmp/symbols"))

    # -- the image

    @override
    def home(self, user: str) -> str:
        return f"/home/{user}"

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

    # -- scripts in the guest (guest_agent/linux: each file's header says what it does)

    @override
    def privileged_prelude(self, folder: str, user: DesktopUser, phase: Phase) -> str:
        return sh_program("linux/privileged-prelude.sh", TASK_DIR=folder, USER_HOME=user.home,
                          DESKTOP_USER=user.name, CU_RUN_PHASE=phase)

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
    def count_items_script(self, folder: str) -> str:
        return f"find {shlex.quote(folder)} -xdev -mindepth 1 | wc -l\n"

    @override
    def script_paths(self, text: str) -> list[str]:
        found = re.findall(r"""(?:\$HOME|\$\{HOME\}|~)(/[^\s"'`;|&<>()$]*)""", text)
        return ["~" + p.rstrip("/") for p in found if p.strip("/")]

    @override
    def clock_script(self, now: float) -> str:
        return f"date -u -s @{now:.3f} >/dev/null"

    carries_network = True
    network_background = CHROMIUM_BACKGROUND

    @override
    def network_start_script(self, forwarder: bytes, ca_cert: bytes, user: DesktopUser, proxy_port: int) -> str:
        chromium_policy = json.dumps({"ProxyMode": "fixed_servers", "ProxyServer": f"127.0.0.1:{proxy_port}",
                                      **CHROMIUM_QUIET})
        return sh_program("linux/network-start.sh", FORWARDER=base64.b64encode(forwarder).decode("ascii"),
                          CA_CERT=base64.b64encode(ca_cert).decode("ascii"), USER_HOME=user.home,
                          DESKTOP_USER=user.name, PROXY=f"http://127.0.0.1:{proxy_port}",
                          CHROMIUM_POLICY=chromium_policy)

    @override
    def sync_script(self) -> str:
        return "sync"

    @override
    def warm_up_script(self) -> str:
        folder = "/root/.cu-run-warm-up"
        return sh_program("linux/warm-up.sh", CU_RUN_STAGED=self.staged_run_script(folder, {"warm-up": b"x"}, "true"),
                          CU_RUN_LISTING=self.list_script(Watch((folder,), self.default_ignore)))

    # -- the write set

    @override
    def list_script(self, watch: Watch) -> str:
        # site=False: no site module (the lister needs none), half of Python's start under TCG.
        return "exec " + python_command("linux/lister.py", HASH_MAX_BYTES, HASH_BUDGET_S, MAX_ENTRIES, watch.since_ns,
                                        len(watch.ignore), *watch.ignore, *watch.roots, site=False) + "\n"

    @override
    def parse_listing(self, output: str) -> Listing:
        """The lister's lines (guest_agent/linux/lister.py), then "complete" or "truncated" and its start time.
        Strict: the output is the guest's, so anything the lister does not print is refused."""
        lines = output.split("\n")
        last = lines[-2].split(" ") if len(lines) >= 2 else []
        if lines[-1] != "" or len(last) != 2 or last[0] not in ("complete", "truncated") or not last[1].isdigit():
            raise InfraError("the write-set listing from the guest is not what the lister prints "
                             f"(it ends {output[-200:]!r})")
        entries: dict[str, Entry] = {}
        unhashed = []
        try:
            for line in lines[:-2]:
                kind, mode, uid, gid, size, mtime_ns, ctime_ns, inode, sha, hex_path, hex_target, xattrs = \
                    line.split(" ")
                if kind not in "fdlo?" or len(kind) != 1:
                    raise ValueError(f"kind {kind!r}")
                path = _from_hex(hex_path)
                error = sha[1:].replace("_", " ") if sha.startswith("!") else ""
                if kind == "?":
                    entries[path] = Entry("?", 0, "", error=error or "could not be listed")
                    continue
                entries[path] = Entry(
                    kind, int(size), sha if len(sha) == 64 else "", int(mtime_ns) / 1e9, mode=int(mode),
                    owner=(int(uid), int(gid)), ctime_ns=int(ctime_ns), inode=int(inode),
                    target=None if hex_target == "-" else _from_hex(hex_target), error=error,
                    xattrs=_attributes(xattrs))
                if kind == "f" and sha == "-":
                    unhashed.append(path)
        except ValueError as exc:
            raise InfraError(f"the write-set listing from the guest has a line the lister does not print: {exc}; "
                             f"it begins {output[:200]!r}") from None
        return Listing(entries, tuple(unhashed), last[0] == "truncated", int(last[1]))

    # -- after the agent

    @override
    def processes_script(self, user: DesktopUser) -> str:
        return sh_program("linux/processes.sh", DESKTOP_USER=user.name)

    @override
    def quarantine_script(self, user: DesktopUser, keep: frozenset[str] | None) -> str:
        # The file defines the quarantine's steps; the line after it runs the one the task asks for.
        return quarantine_steps(user, keep) + ("freeze_user\n" if keep is None else "kill_new\n")

    # -- the MCP file tools

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

    @override
    def privileged_script_mistakes(self, text: str) -> list[str]:
        """$HOME and ~ are root's in a privileged script; the desktop user's home is $USER_HOME.
        Comments do not count."""
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            # The shell expands $HOME outside single quotes, and ~ only where no quote is around it.
            expanded, bare = _shell_expanding(_code_of(line))
            if _HOME_VAR.search(expanded) or _TILDE.search(bare):
                found.append(f"line {number}: runs as the admin, whose home $HOME (and ~) is not the desktop "
                             "user's: use $USER_HOME")
        return found

    @override
    def verdict_warnings(self, text: str) -> list[str]:
        # Data: what a command printed (x=$(...), read x): a file's content, a listing.
        data = set(_FROM_COMMAND.findall(text)) | {n for names in _READ.findall(text) for n in names.split()}
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            code = _code_of(line)
            verdict = _STDOUT_VERDICT.search(code)
            if not verdict:
                continue
            shown = code[verdict.start():]
            if "$(" in shown or "`" in shown or any(re.search(rf"\$\{{?{n}\b", shown) for n in data):
                found.append(f"line {number}: echoes what a command printed into its verdict line: a newline in "
                             "that text (or, under dash, a backslash escape) can forge a PASS; use verdict fail "
                             "\"REASON\", and printf '%s' for data")
            else:
                found.append(f"line {number}: prints its verdict on stdout; use verdict pass / verdict fail REASON, "
                             "which agent text cannot forge")
        return found

    @override
    def live_state_reads(self, text: str) -> list[str]:
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            asked = sorted({m.group(1) for m in _LIVE_STATE.finditer(_code_of(line))})
            if asked:
                found.append(f"line {number}: asks a running program ({', '.join(asked)}): desktop_in_verify keeps "
                             "what ran before the agent, which the agent may have driven; prefer what the app saved "
                             "to disk, or check the answer against it")
        return found

    # -- conformance checks

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


def _ssh(manifest) -> SshAccess:
    """The image's SSH access; access_problem() refused an image without it when it was loaded."""
    if manifest.ssh is None:
        raise InfraError(f"image {manifest.name} has no SSH access in its manifest")
    return manifest.ssh


def _shell_expanding(code: str) -> tuple[str, str]:
    """CODE with single-quoted text blanked (where $ does not expand), and with all quoted text
    blanked (where ~ does not): a line at a time, roughly as sh reads it."""
    expanded, bare, quote, escaped = [], [], "", False
    for char in code:
        if escaped:
            escaped = False
            expanded.append(" ")
            bare.append(" ")
            continue
        if char == "\\" and quote != "'":
            escaped = True
        elif quote == "" and char in "'\"":
            quote = char
        elif char == quote:
            quote = ""
        expanded.append(" " if quote == "'" else char)
        bare.append(char if quote == "" else " ")
    return "".join(expanded), "".join(bare)


def _code_of(line: str) -> str:
    """LINE without its comment (roughly: a # that starts a word)."""
    if line.lstrip().startswith("#"):
        return ""
    return re.split(r"(?:^|\s)#", line, maxsplit=1)[0]


def _from_hex(text: str) -> str:
    return bytes.fromhex(text).decode("utf-8", "surrogateescape")


def _attributes(field: str) -> tuple[tuple[str, str], ...]:
    """The lister's XATTRS field: (name, digest of the value) pairs; one ("", "!why") pair when
    they could not be read, so that this too differs from what was read before."""
    if field == "-":
        return ()
    if field.startswith("!"):
        return (("", field),)
    pairs = []
    for item in field.split(","):
        name, colon, digest = item.partition(":")
        if not colon or len(digest) != 64:
            raise ValueError(f"extended attribute {item[:80]!r}")
        pairs.append((_from_hex(name), digest))
    return tuple(pairs)


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
                      KEEP=" ".join(sorted(keep or ())), X_DISPLAY=X_DISPLAY, X_SWEEP=program_text("linux/x_sweep.py"))
