"""The linux profile: a Debian desktop reached over SSH, task scripts in sh.

The desktop user logs in with the image's client key; the admin is root, by a second key,
with a clean environment (env -i) and only system folders on its PATH. Privileged scripts
are staged in root's /run/cu-task (tmpfs, 0700); the agent's processes are frozen with the
cgroup v2 freezer before verification.
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
from runner.guest.qga import AgentLink, QemuAgentShell
from runner.guest.ssh import SshShell
from runner.profiles.linux_x_sweep import x_sweep_script
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
    from runner.profiles.catalog import Image, SshAccess

# A verdict printed on stdout (the older contract), and one that carries data: an expansion
# after PASS/FAIL in the same echo or printf.
_STDOUT_VERDICT = re.compile(r"\b(echo|printf)\b[^;|&]*?['\"]?\b(PASS|FAIL)\b")
_FROM_COMMAND = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)=[\"']?(?:\$\(|`)")
_READ = re.compile(r"\bread\b(?:\s+-[a-z]+)*((?:\s+[A-Za-z_][A-Za-z0-9_]*)+)")
_HOME_VAR = re.compile(r"\$HOME\b|\$\{HOME[}:]")
_TILDE = re.compile(r"(?<![\w/$])~/")
AS_USER_TIMEOUT = 30  # seconds an as_user call may take during verification
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
    def open_shells(self, image: Image, host: str, port: int, agent: AgentLink | None = None) -> Shells:
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
    def endpoint(self, image: Image, host: str, port: int) -> ShellEndpoint:
        ssh = _ssh(image.manifest)
        key = image.path(ssh.private_key)
        return ShellEndpoint("ssh", {"host": host, "port": port, "user": ssh.user, "key": str(key)},
                             f"ssh -i {key} -p {port} -o StrictHostKeyChecking=no {ssh.user}@{host}")

    # -- scripts in the guest

    @override
    def privileged_prelude(self, folder: str, user: DesktopUser, phase: Phase) -> str:
        q = shlex.quote
        user_env = (f"env -i HOME={q(user.home)} USER={q(user.name)} LOGNAME={q(user.name)} "
                    "PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8")
        if phase == "setup":
            # Before the agent the guest is as the image made it: what setup starts may stay.
            as_user = f'as_user() {{ runuser -u "$DESKTOP_USER" -- {user_env} "$@"; }}\n'
        else:
            # During verification the user's files are the agent's: what they start is killed
            # with its cgroup (cgroup.kill reaches double-forked daemons too), and a call ends
            # after AS_USER_TIMEOUT seconds (exit 124), so a slow ~/.profile cannot make the
            # verifier run past its own time.
            as_user = (
                "as_user() {\n"
                "    _cg=/sys/fs/cgroup/cu-run-as-user-$$\n"
                "    mkdir -p \"$_cg\" || return 125\n"
                "    sh -c 'echo $$ > \"$1/cgroup.procs\" && shift && exec \"$@\"' as_user \"$_cg\" "
                f"timeout -k 2 \"${{AS_USER_TIMEOUT:-{AS_USER_TIMEOUT}}}\" "
                f"runuser -u \"$DESKTOP_USER\" -- {user_env} \"$@\"\n"
                "    _status=$?\n"
                "    echo 1 > \"$_cg/cgroup.kill\"\n"
                "    _n=0; while [ $_n -lt 100 ] && [ -s \"$_cg/cgroup.procs\" ]; do sleep 0.05; _n=$((_n + 1)); done\n"
                "    rmdir \"$_cg\" 2>/dev/null\n"
                "    return $_status\n"
                "}\n")
        return (f"TASK_DIR={q(folder)}; USER_HOME={q(user.home)}; DESKTOP_USER={q(user.name)}\n"
                "export TASK_DIR USER_HOME DESKTOP_USER\n"
                f"{as_user}"
                'cd "$USER_HOME" || exit 125\n')

    @override
    def agent_prelude(self, folder: str) -> str:
        return f"TASK_DIR={shlex.quote(folder)}; export TASK_DIR; cd \"$HOME\"\n"

    @override
    def stage_script(self, folder: str, subfolders: list[str]) -> str:
        made = " ".join(shlex.quote(f"{folder}/{d}") for d in subfolders)
        return f"umask 077; rm -rf {folder} && mkdir -m 0700 {folder} && mkdir -p {folder} {made}"

    @override
    def remove_script(self, folder: str) -> str:
        return f"rm -rf {folder}"

    @override
    def chained_script(self, first: str, boundary: str, second: str) -> str:
        # FIRST runs in a subshell, so an `exit` in it ends only its part.
        return f"(\n{first}\n)\nq=$?; [ $q -eq 0 ] || exit $q\necho {boundary}\n{second}"

    @override
    def staged_run_script(self, folder: str, files: dict[str, bytes], script: str, after: str = "") -> str:
        # Under TCG every command, file copy and program started costs (~0.3 s a command,
        # 0.05-0.15 s a program): the files travel inside the one command, and the script runs
        # in a subshell of this one. Text files are written by the shell's own printf; only
        # when one is binary do they go as a tar in base64 (two programs more). A folder left
        # by a killed earlier run is removed first; only then is rm needed.
        q = shlex.quote(folder)
        everything = {**files, RUN_FILE: script.encode()}
        folders = sorted({posixpath.dirname(p) for p in everything} - {""})
        made = q + "".join(f" {shlex.quote(f'{folder}/{d}')}" for d in folders)
        text = _as_text(everything)
        if text is not None:
            fill = "".join(f"printf %s {shlex.quote(content)} > {shlex.quote(f'{folder}/{path}')} && "
                           for path, content in sorted(text.items())) + "true"
            trailer = ""
        else:
            fill = f"base64 -d <<'{_END_OF_FILES}' | tar -xf - --no-same-owner -C {q}"
            trailer = base64.encodebytes(_tar(everything)).decode() + _END_OF_FILES + "\n"
        return (f"umask 077; {{ mkdir -m 0700 {made} 2>/dev/null || {{ rm -rf {q} && mkdir -m 0700 {made}; }}; }} && "
                f"{fill} || {{ echo {shlex.quote(STAGING_FAILED)} >&2; exit {STAGING_FAILED_EXIT}; }}\n{trailer}"
                f"( . {q}/{RUN_FILE} ) </dev/null\nrc=$?\n{after}rm -rf {q}\nexit $rc\n")

    @override
    def verdict_helper(self, record: str) -> str:
        fail, passed = shlex.quote(record + ".fail"), shlex.quote(record + ".pass")
        # printf '%s': the reason is data, never a format or an escape sequence (dash's echo
        # expands backslashes).
        return (
            "verdict() {\n"
            "    case \"$1\" in\n"
            f"        pass) [ $# -eq 1 ] || {{ printf 'verdict pass takes no reason\\n' >&2; exit 2; }}\n"
            f"              [ -e {fail} ] || : > {passed} ;;\n"
            f"        fail) shift; [ -e {fail} ] || printf '%s' \"${{*:-no reason given}}\" > {fail} ;;\n"
            "        *) printf 'verdict: say verdict pass, or verdict fail REASON\\n' >&2; exit 2 ;;\n"
            "    esac\n"
            "    exit 0\n"
            "}\n")

    @override
    def verdict_trailer(self, record: str, boundary: str) -> str:
        fail, passed = shlex.quote(record + ".fail"), shlex.quote(record + ".pass")
        return (f"if [ -e {fail} ]; then printf '\\n%s\\nfail\\n' {boundary}; head -c {MAX_RECORD} {fail}; "
                f"elif [ -e {passed} ]; then printf '\\n%s\\npass' {boundary}; fi\n")

    @override
    def verdict_read_script(self, record: str) -> str:
        fail, passed = shlex.quote(record + ".fail"), shlex.quote(record + ".pass")
        return (f"if [ -e {fail} ]; then printf 'fail\\n'; head -c {MAX_RECORD} {fail}; "
                f"elif [ -e {passed} ]; then printf pass; fi\n")

    @override
    def staged_path(self, folder: str, relative: str) -> str:
        return f"{folder}/{relative}"

    @override
    def hand_home_script(self, user: DesktopUser) -> str:
        return f"find {shlex.quote(user.home)} -xdev -user 0 -exec chown -h {shlex.quote(user.name)}: {{}} +\n"

    @override
    def grant_admin_script(self, user: DesktopUser) -> str:
        return (f"umask 0337; echo {shlex.quote(user.name + ' ALL=(ALL) NOPASSWD: ALL')} > /etc/sudoers.d/cu-run-agent\n"
                "visudo -cq -f /etc/sudoers.d/cu-run-agent\n")

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
        # As root: the forwarder (python3); the episode's CA in the system store and in USER's NSS
        # databases (Chromium's ~/.pki/nssdb, Thunderbird's and Firefox's profiles) where the guest
        # has the tools; the proxy for new sessions (environment) and for Chromium (a policy).
        code = base64.b64encode(forwarder).decode("ascii")
        cert = base64.b64encode(ca_cert).decode("ascii")
        proxy = f"http://127.0.0.1:{proxy_port}"
        chromium_policy = json.dumps({"ProxyMode": "fixed_servers", "ProxyServer": f"127.0.0.1:{proxy_port}",
                                      **CHROMIUM_QUIET})
        return f"""set -e
d=/run/cu-run-network
mkdir -p -m 700 "$d"
printf %s '{code}' | base64 -d > "$d/forwarder.py"
printf %s '{cert}' | base64 -d > "$d/cu-run-episode-ca.pem"
# -I -S: no site module (the forwarder needs the standard library only), half of its start under TCG.
setsid python3 -I -S "$d/forwarder.py" </dev/null >"$d/forwarder.log" 2>&1 &
i=0
until grep -q listening "$d/forwarder.log" 2>/dev/null; do
    # python3's start under TCG on a busy host takes seconds: a minute before it counts as failed.
    i=$((i + 1)); [ "$i" -le 600 ] || {{ cat "$d/forwarder.log" >&2; exit 1; }}; sleep 0.1
done
if [ -d /usr/local/share/ca-certificates ] && command -v update-ca-certificates >/dev/null; then
    cp "$d/cu-run-episode-ca.pem" /usr/local/share/ca-certificates/cu-run-episode-ca.crt
    update-ca-certificates >/dev/null 2>&1 || true
fi
if command -v certutil >/dev/null; then
    install -m 644 "$d/cu-run-episode-ca.pem" /run/cu-run-episode-ca.pem
    home={shlex.quote(user.home)}
    # Chromium's store, and each Thunderbird or Firefox profile (*.default*; beside them are
    # folders such as "Crash Reports", whose names hold spaces: read a line at a time).
    {{ echo "$home/.pki/nssdb"; find "$home/.thunderbird" "$home/.mozilla/firefox" -mindepth 1 -maxdepth 1 \\
        -type d -name '*.default*' 2>/dev/null; }} | while IFS= read -r db; do
        runuser -u {shlex.quote(user.name)} -- sh -c '
            mkdir -p "$1" && {{ [ -f "$1/cert9.db" ] || certutil -N --empty-password -d "sql:$1"; }} &&
            certutil -A -d "sql:$1" -t C,, -n "cu-run episode CA" -i /run/cu-run-episode-ca.pem' sh "$db"
    done
fi
printf 'http_proxy={proxy}\\nhttps_proxy={proxy}\\nHTTP_PROXY={proxy}\\nHTTPS_PROXY={proxy}\\n' >> /etc/environment
for p in /etc/chromium/policies/managed /etc/opt/chrome/policies/managed; do
    mkdir -p "$p" && printf %s '{chromium_policy}' > "$p/cu-run-proxy.json"
done
"""

    @override
    def sync_script(self) -> str:
        return "sync"

    @override
    def warm_up_script(self) -> str:
        # Right after a restore, TCG has translated none of the guest's code: the first staging
        # and the first listing of an episode cost ~0.9 s more than later ones (measured).
        # Running each once, on nothing, pays that before the episode begins.
        folder = "/root/.cu-run-warm-up"
        return (f"( {self.staged_run_script(folder, {'warm-up': b'x'}, 'true')} ) >/dev/null\n"
                f"( {self.list_script(Watch((folder,), self.default_ignore))} ) >/dev/null\n")

    # -- the write set

    @override
    def list_script(self, watch: Watch) -> str:
        args = " ".join(shlex.quote(str(a)) for a in (HASH_MAX_BYTES, HASH_BUDGET_S, MAX_ENTRIES, watch.since_ns,
                                                      len(watch.ignore), *watch.ignore, *watch.roots))
        # -S: no site module (the lister needs none), half of Python's start under TCG.
        return f"exec python3 -I -S -c {shlex.quote(_LINUX_LISTER)} {args}\n"

    @override
    def parse_listing(self, output: str) -> Listing:
        """The lister's lines (see _LINUX_LISTER), then "complete" or "truncated" and its start time.
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
        # PID and start time: a PID the agent frees and gets again for a process of its own
        # (it can spin through PIDs) is not the process that was kept.
        return (f"for p in $(pgrep -u {shlex.quote(user.name)}); do\n"
                "    { read -r s < \"/proc/$p/stat\"; } 2>/dev/null || continue\n"
                "    set -- ${s##*) }; printf '%s:%s\\n' \"$p\" \"${20}\"\n"
                "done\n")

    @override
    def quarantine_script(self, user: DesktopUser, keep: frozenset[str] | None) -> str:
        return _freeze_script(user) if keep is None else _kill_new_script(user, keep)

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
        return (f"t=$(realpath -e -- {shlex.quote(target)}) || exit 3\n"
                f"case \"$t/\" in {shlex.quote(posixpath.normpath(root))}/*) ;; *) exit 4;; esac\n"
                "find \"$t\" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%TY-%Tm-%Td %TH:%TM\\t%f\\n' | sort -k4\n")

    @override
    def read_file_script(self, root: str, target: str, max_bytes: int) -> str:
        return (f"t=$(realpath -e -- {shlex.quote(target)}) || exit 3\n"
                f"case \"$t\" in {shlex.quote(posixpath.normpath(root))}/*) ;; *) exit 4;; esac\n"
                f"[ -f \"$t\" ] || exit 5\n[ $(stat -c %s \"$t\") -le {max_bytes} ] || exit 6\n"
                "base64 -w0 \"$t\"\n")

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
_END_OF_FILES = "CU_RUN_END_OF_FILES"


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


# Under TCG each module Python imports costs: json and hashlib took ~0.4 s of a listing's
# ~0.7 s in the guest (docs/performance.md). So the arguments come as words, the output is
# lines of fields with each path and link target in hex (any bytes a name holds survive, tabs
# and newlines too), the SHA-256 is the interpreter's built-in one where there is one, and the
# ignore patterns are matched by a few lines here rather than by importing re or fnmatch.
#
# A line: KIND MODE UID GID SIZE MTIME_NS CTIME_NS INODE SHA HEX-PATH HEX-TARGET XATTRS, where
# SHA is the digest, "-" (not hashed) or "!" and the reason it could not be read, HEX-TARGET is a
# link's target or "-", and XATTRS the extended attributes (see attributes()). Last: "complete"
# or "truncated", and the guest's clock when it began.
_LINUX_LISTER = """
import os, stat, sys, time
try:
    from _sha256 import sha256
except ImportError:
    from hashlib import sha256
started_ns = time.time_ns()
hash_max, budget, max_entries, since_ns, n_ignore = (int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]),
                                                     int(sys.argv[4]), int(sys.argv[5]))
ignore = [p.rstrip("/").split("/") for p in sys.argv[6:6 + n_ignore]]
roots = sys.argv[6 + n_ignore:]
started = time.monotonic()
seen, truncated = set(), False
out = []

def wild(pattern, name):
    # * and ? within one name, by backtracking over the last *
    p = n = 0
    star = mark = -1
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]):
            p += 1; n += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, n; p += 1
        elif star >= 0:
            p, mark = star + 1, mark + 1; n = mark
        else:
            return False
    return all(c == "*" for c in pattern[p:])

def fits(pattern, parts):
    # ** as a whole name stands for any number of names; a match of a parent covers what is inside
    if not pattern:
        return True
    if pattern[0] == "**":
        return any(fits(pattern[1:], parts[i:]) for i in range(len(parts) + 1))
    return bool(parts) and wild(pattern[0].replace("**", "*"), parts[0]) and fits(pattern[1:], parts[1:])

def ignored(path):
    parts = path.split("/")
    return any(fits(p, parts) for p in ignore)

def kind_of(mode):
    return "f" if stat.S_ISREG(mode) else "d" if stat.S_ISDIR(mode) else "l" if stat.S_ISLNK(mode) else "o"

def why(exc):
    return "!" + (os.strerror(exc.errno).replace(" ", "_") if exc.errno else type(exc).__name__)

def digest(path, st):
    if st.st_size > hash_max or st.st_ctime_ns < since_ns or time.monotonic() - started > budget or ignored(path):
        return "-"
    h = sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            while True:
                block = os.read(fd, 1 << 20)
                if not block:
                    break
                h.update(block)
        finally:
            os.close(fd)
    except OSError as exc:
        return why(exc)
    return h.hexdigest()

def attributes(path):
    # Every extended attribute, ACLs (system.posix_acl_*) included: NAME:SHA256-OF-VALUE, hex
    # names, comma-joined in name order; "-" for none, "!" and why where they cannot be read.
    try:
        names = sorted(os.listxattr(path, follow_symlinks=False))
        return ",".join("%s:%s" % (os.fsencode(n).hex(), sha256(os.getxattr(path, n, follow_symlinks=False)).hexdigest())
                        for n in names) or "-"
    except OSError as exc:
        return why(exc)

def line(kind, st, sha, path, target):
    out.append("%s %d %d %d %d %d %d %d %s %s %s %s" % (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
               st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha, os.fsencode(path).hex(), target,
               attributes(path)))

def add(path):
    # None: the entry cap is reached; "": nothing to enter (seen, gone, not a folder, not
    # listable); else the kind, "x" for a folder on another filesystem (listed, not entered).
    global truncated
    if path in seen:  # roots that overlap
        return ""
    if len(seen) >= max_entries:
        truncated = True
        return None
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""  # gone while listing
    except OSError as exc:
        # Listed all the same, so what cannot be examined shows as a change, never as nothing.
        seen.add(path)
        out.append("? 0 0 0 0 0 0 0 %s %s - -" % (why(exc), os.fsencode(path).hex()))
        return ""
    seen.add(path)
    kind = kind_of(st.st_mode)
    target = "-"
    if kind == "l":
        try:
            target = os.fsencode(os.readlink(path)).hex() or "-"
        except OSError as exc:
            line(kind, st, why(exc), path, "-")
            return ""
    line(kind, st, digest(path, st) if kind == "f" else "-", path, target)
    return kind if kind != "d" or st.st_dev == device else "x"

def unlistable(exc):
    # A folder whose entries cannot be read: its line says why, so it counts as changed.
    path = exc.filename if isinstance(exc.filename, str) else os.fsdecode(exc.filename or b"")
    for i in range(len(out) - 1, -1, -1):
        fields = out[i].split(" ")
        if fields[9] == os.fsencode(path).hex():
            fields[8] = why(exc)
            out[i] = " ".join(fields)
            return
    out.append("? 0 0 0 0 0 0 0 %s %s - -" % (why(exc), os.fsencode(path).hex()))

for root in roots:
    if not os.path.lexists(root):
        continue
    device = os.lstat(root).st_dev
    if add(root) != "d":
        continue
    for folder, dirs, files in os.walk(root, onerror=unlistable):
        kept = []
        for name in sorted(dirs):
            kind = add(os.path.join(folder, name))
            if kind is None:
                break
            if kind == "d":
                kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            if add(os.path.join(folder, name)) is None:
                break
        if truncated:
            break
out.append("%s %d" % ("truncated" if truncated else "complete", started_ns))
sys.stdout.write("\\n".join(out) + "\\n")
"""


def _kill_outside(slice_test: str) -> str:
    """Kills, until none is left, every process of user $u for which SLICE_TEST fails."""
    return (
        "round=0\n"
        "while [ $round -lt 50 ]; do\n"
        "    round=$((round + 1)); left=0\n"
        "    for p in $(pgrep -u \"$u\"); do\n"
        f"        {slice_test} && continue\n"
        "        kill -9 \"$p\" 2>/dev/null && left=1\n"
        "    done\n"
        "    [ $left = 0 ] && break\n"
        "    sleep 0.05\n"
        "done\n")


# Under TCG each process the guest starts costs ~50 ms: the quarantine reads /proc and the
# cgroup files with the shell's own `read`, not a grep per process.
_FROZEN = ("frozen() { f=0; while read -r k v; do [ \"$k\" = frozen ] && f=$v; done < \"$cg/cgroup.events\"; "
           "[ \"$f\" = 1 ]; }\n")
_IN_USER_SLICE = ("{ l=; read -r l < \"/proc/$p/cgroup\"; } 2>/dev/null; "
                  "case \"$l\" in *\"/user-$u.slice/\"*) true;; *) false;; esac")


# For _kill_outside: whether process $p is one to keep (see _kill_new_script). A zombie counts as
# kept: it is dead already, and its frozen parent cannot reap it until the thaw. But /proc/PID/stat
# is the leader thread's: a thread group whose leader has exited shows Z while its other threads
# run on. So a Z is dead only when /proc/PID/task holds no thread but the leader (a glob, not a
# program: ~50 ms a process under TCG).
# Commands that ask a running program, not the disk: the X server, the session bus and what it
# starts, accessibility, the process table, and as_user (the user's own programs and settings).
_LIVE_STATE = re.compile(r"(?<![\w.-])(xdotool|xprop|xwininfo|wmctrl|xdpyinfo|xwd|xclip|xsel|dbus-send|gdbus|"
                         r"busctl|qdbus|xfconf-query|gsettings|dconf|pyatspi|pgrep|pidof|ps|as_user)(?![\w.-])")

# The display the images' desktop runs on (startx's default).
X_DISPLAY = "0"

_KEPT = ("{ s=; read -r s < \"/proc/$p/stat\"; } 2>/dev/null; [ -n \"$s\" ] || continue; set -- ${s##*) }; "
         "if [ \"$1\" = Z ]; then z=1; for t in /proc/$p/task/*; do [ \"${t##*/}\" = \"$p\" ] || z=0; done; "
         "[ $z = 0 ] || continue; fi; tty=$((($5 >> 8) & 4095)); "
         "case \"$keep\" in *\" $p:${20} \"*) [ $tty -lt 136 ] || [ $tty -gt 143 ];; *) false;; esac")


def _user_id(user: DesktopUser) -> str:
    """Sets u to USER's uid, or exits 3: from /etc/passwd, with the shell's own `read` (the
    guest's `id` is a program, ~0.15 s under TCG)."""
    return ("u=; while IFS=: read -r n _ i _; do "
            f"[ \"$n\" = {shlex.quote(user.name)} ] && {{ u=$i; break; }}; done < /etc/passwd\n"
            "[ -n \"$u\" ] || { echo 'the desktop user is not in /etc/passwd' >&2; exit 3; }\n")


def _freeze_script(user: DesktopUser) -> str:
    # The first checks of the freeze spin: `sleep` is a program, and the freezer is often done at once.
    return (
        _user_id(user)
        + "cg=/sys/fs/cgroup/user.slice/user-$u.slice\n"
        + _FROZEN +
        "n=0\n"
        "if [ -d \"$cg\" ]; then\n"
        "    echo 1 > \"$cg/cgroup.freeze\" || exit 4\n"
        "    t=0; until frozen || [ $t -ge 220 ]; do [ $t -lt 20 ] || sleep 0.05; t=$((t + 1)); done\n"
        "    frozen || { echo \"the user's slice did not freeze\" >&2; exit 5; }\n"
        # Every cgroup of the slice, to the depth systemd makes (user@UID.service/app.slice/UNIT):
        # cgroup.procs lists only a cgroup's own members.
        "    for f in \"$cg\"/cgroup.procs \"$cg\"/*/cgroup.procs \"$cg\"/*/*/cgroup.procs \"$cg\"/*/*/*/cgroup.procs; do\n"
        "        [ -f \"$f\" ] || continue\n"
        "        while read -r _; do n=$((n + 1)); done < \"$f\"\n"
        "    done\n"
        "fi\n"
        + _kill_outside(_IN_USER_SLICE)
        + "echo \"froze $n processes of the desktop user\"\n")


def _kill_new_script(user: DesktopUser, keep: frozenset[str]) -> str:
    """desktop_in_verify: the user's slice frozen first, so nothing in it can fork while the new
    processes are killed in one pass (a process that forks as fast as it is killed cannot
    outrun a frozen cgroup). Kept: what ran before the agent (PID and start time), but not a
    kept process on a pseudo-terminal: that is a shell the agent could type into, whose
    builtins run without a new process. Then the slice thaws, and every kept process gets
    SIGCONT, should the agent have stopped one (the window manager, a session bus) so that the
    verifier's query of the desktop would hang."""
    kept = " ".join(sorted(keep))
    return (
        _user_id(user)
        + "cg=/sys/fs/cgroup/user.slice/user-$u.slice\n"
        + _FROZEN
        + f"keep=' {kept} '\n"
        "froze=0\n"
        "if [ -d \"$cg\" ]; then\n"
        "    echo 1 > \"$cg/cgroup.freeze\" || exit 4\n"
        "    t=0; until frozen || [ $t -ge 220 ]; do [ $t -lt 20 ] || sleep 0.05; t=$((t + 1)); done\n"
        "    frozen || { echo \"the user's slice did not freeze\" >&2; exit 5; }\n"
        "    froze=1\n"
        "fi\n"
        + _STOP_STARTERS
        + _hide_bus_services(user)
        + _kill_outside(_KEPT)
        + "[ $froze = 0 ] || echo 0 > \"$cg/cgroup.freeze\" || exit 6\n"
        "for p in $(pgrep -u \"$u\"); do case \"$starters\" in *\" $p \"*) ;; *) kill -CONT \"$p\" 2>/dev/null;; esac; done\n"
        + _reload_bus(user)
        # What a kept process started in the moment since the thaw.
        + _kill_outside(_KEPT)
        + x_sweep_script(X_DISPLAY, "$u", keep)
        + "echo \"killed the desktop user's processes started during the episode, and its terminals' shells\"\n"
        "[ \"$starters\" = ' ' ] || echo \"stopped the processes that start others for the user:$starters\"\n"
        "[ -z \"$hidden\" ] || echo \"hid the user's session-bus services:$hidden\"\n")


# Kept processes whose job is to start others, which would start the agent's code again after
# the kill: the user's service manager (systemd --user: a unit with Restart=always, a timer, a
# socket; its own cgroup is user@UID.service/init.scope) and the XSMP session managers (they
# restart their clients). SIGSTOP while the slice is frozen, so they never run again, and no
# SIGCONT after. The verifier needs neither: the services the desktop runs are running.
_SESSION_MANAGERS = ("xfce4-session", "gnome-session-b", "gnome-session-c", "lxsession", "lxqt-session",
                     "mate-session", "ksmserver", "cinnamon-sessio")
_STOP_STARTERS = (
    "starters=' '; bus=0\n"
    "for p in $(pgrep -u \"$u\"); do\n"
    "    { l=; read -r l < \"/proc/$p/cgroup\"; c=; read -r c < \"/proc/$p/comm\"; } 2>/dev/null\n"
    "    case \"$c\" in dbus-daemon|dbus-broker) bus=1;; esac\n"
    "    case \"$l\" in *\"/user@$u.service/init.scope\") ;; *)\n"
    f"        case \"$c\" in {'|'.join(_SESSION_MANAGERS)}) ;; *) continue;; esac;; esac\n"
    "    kill -STOP \"$p\" 2>/dev/null && starters=\"$starters$p \"\n"
    "done\n")


def _hide_bus_services(user: DesktopUser) -> str:
    """The session bus starts a service named in a file of the user's own service folders
    (~/.local/share/dbus-1/services; $XDG_RUNTIME_DIR/dbus-1/services) when anything asks for
    its name: a verifier's query would start the agent's code, which would answer it. Each
    such folder that exists gets an empty read-only tmpfs over it, and the bus reloads after
    the thaw (_reload_bus). The disk keeps what the agent left, but the listing after does not
    enter the tmpfs: ~/.local is the desktop's own churn, which the write set ignores anyway.
    The folder as the bus resolves it: a link to elsewhere is followed to what it names."""
    folders = (f"{shlex.quote(user.home)}/.local/share/dbus-1/services", '"/run/user/$u/dbus-1/services"')
    return (
        "hidden=\n"
        f"for d in {' '.join(folders)}; do\n"
        "    [ -d \"$d\" ] || continue\n"
        "    r=$(realpath -e -- \"$d\") || continue\n"
        "    mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=0555 cu-run-quarantine \"$r\" || exit 7\n"
        "    hidden=\"$hidden $r\"\n"
        "done\n")


def _reload_bus(user: DesktopUser) -> str:
    """A running session bus read the hidden folders before: told to reload its configuration,
    it forgets their services, and answers only once it has (dbus-send waits for the reply). As
    the user, over the bus's socket, where a bus of the user's runs (_STOP_STARTERS sets bus=1);
    none that runs now can start later, its starter stopped. Bounded: the agent may have stopped
    the bus. A bus that did not reload could still start the agent's code: the quarantine fails
    (exit 8)."""
    return (
        "if [ -n \"$hidden\" ] && [ $bus = 1 ] && [ -S \"/run/user/$u/bus\" ]; then\n"
        f"    timeout 10 runuser -u {shlex.quote(user.name)} -- "
        "env DBUS_SESSION_BUS_ADDRESS=\"unix:path=/run/user/$u/bus\" "
        "dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus "
        "org.freedesktop.DBus.ReloadConfig >/dev/null || { echo \"the session bus did not reload\" >&2; exit 8; }\n"
        "fi\n")
