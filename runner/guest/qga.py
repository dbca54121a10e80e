"""GuestShell over the QEMU guest agent (qemu-ga on a virtio-serial port), reached through libvirt.

Why: the agent is already running in a warm state, so a restored guest answers its first
command with no login. Under TCG a warm episode is ready ~1.2 s sooner than over SSH
(docs/performance.md). Nothing in the guest listens on the network for it, and only root can
open its port in the guest, so the desktop user cannot reach it.

How a command runs:
- `guest-exec` starts `timeout -k 2 N /bin/sh -s` with the script on its stdin and the
  environment given whole (the agent's own never reaches it).
- The script's first line sends its stdout and stderr to files in a root-only spool folder,
  each begun with a stamp of this command's. Nothing is captured through pipes:
  - libvirt carries a message of at most 4 MiB, and drops its agent connection for good
    after a reply over 10 MiB. A write-set listing can be larger; a file is read back in
    pieces that never are.
  - The agent reports an exit only once the pipes close. A background process a script
    left behind would hold them open.
- The host polls `guest-exec-status`. The guest's `timeout` kills the script; the host stops
  waiting a little later, as over SSH.
"""

from __future__ import annotations

import base64
import secrets
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner.errors import CommandTimeout, GuestUnreachable
from runner.guest.base import MAX_OUTPUT_BYTES, ExecResult, GuestShell, NotReady, output_too_large, poll_until_ready
from typing_extensions import override

# Sends one agent command ({"execute": ..., "arguments": ...}) and returns its "return" value.
# Raises GuestUnreachable when the agent does not answer, AgentCommandFailed when it answers
# with an error. LibvirtHost.agent_command is one.
AgentLink = Callable[[dict, float], object]


class AgentCommandFailed(Exception):
    """The guest agent answered, with an error (a file that does not exist, say)."""


# Slack the guest-side `timeout` gets before the host gives up on the command.
_KILL_GRACE = 5.0
# libvirt carries a request or a reply as one string of at most 4 MiB (and drops its agent
# connection for good after a reply over 10 MiB): files move in pieces whose base64 fits.
_CHUNK = 2 * 2**20
# A script longer than this (a task's files staged inside it) goes to a spool file first.
_INLINE_MAX = 2 * 2**20
# Polling the agent costs the guest's CPU too: start fast for short commands, then back off.
_POLL_FIRST, _POLL_MAX = 0.01, 0.05
_CALL_TIMEOUT = 10.0  # one agent call (not the command it starts)
# Root's alone, on the root filesystem: a desktop user who fills the disk still leaves the
# blocks ext4 keeps for root, so the runner's output always has room.
SPOOL = "/var/lib/cu-admin"


class QemuAgentShell(GuestShell):
    def __init__(self, send: AgentLink, *, environment: dict[str, str], workdir: str = "/",
                 spool: str = SPOOL, timeout_path: str = "/usr/bin/timeout", shell_path: str = "/bin/sh") -> None:
        """SEND reaches the agent (its errors name the VM). ENVIRONMENT is all a command sees;
        WORKDIR is where it starts; SPOOL (made 0700 by the first command) holds its output."""
        self._send, self._spool = send, spool
        self._env = [f"{k}={v}" for k, v in environment.items()]
        self._workdir, self._timeout_path, self._shell_path = workdir, timeout_path, shell_path
        # Spool files are reused, not removed (a removal would cost the guest a process):
        # one pair per command running at once, named apart from any other shell's.
        self._prefix = secrets.token_hex(4)
        self._free: list[str] = []
        self._made = 0
        self._lock = threading.Lock()

    def _call(self, execute: str, timeout: float = _CALL_TIMEOUT, **arguments) -> Any:
        """The agent's answer: a dict, or an int for guest-file-open."""
        return self._send({"execute": execute, "arguments": arguments} if arguments else {"execute": execute},
                          timeout)

    @override
    def wait_ready(self, timeout: float) -> float:
        def ping(left: float) -> None:
            try:
                self._call("guest-ping", timeout=max(1.0, min(5.0, left)))
            except (GuestUnreachable, AgentCommandFailed) as exc:  # not connected yet: still booting
                raise NotReady from exc

        return poll_until_ready("the QEMU guest agent", timeout, 0.1, ping)

    def freeze_filesystems(self) -> int:
        """Freezes the guest's filesystems (FIFREEZE each): what was written is on the disk, ext4's
        journal emptied into place, and nothing more is written until thaw_filesystems(). Returns
        how many it froze; AgentCommandFailed when it could not."""
        return int(self._call("guest-fsfreeze-freeze", timeout=60))

    def thaw_filesystems(self) -> None:
        self._call("guest-fsfreeze-thaw", timeout=60)

    @override
    def freezer(self) -> QemuAgentShell:
        return self

    @override
    def run(self, script: str, timeout: float = 60.0) -> ExecResult:
        spool = self._take_spool()
        try:
            return self._run(script, timeout, f"{self._spool}/{spool}")
        finally:
            with self._lock:
                self._free.append(spool)

    def _run(self, script: str, timeout: float, spool: str) -> ExecResult:
        out, err = f"{spool}.out", f"{spool}.err"
        # On the script's first line, so its own line numbers stay what they are over SSH.
        folder = shlex.quote(self._spool)
        # Each output file starts with this command's own stamp: a file without it holds an earlier
        # command's output (this one failed before its redirection), never to be read as this one's.
        stamp = secrets.token_hex(8)
        head = (f"[ -d {folder} ] || mkdir -m 700 {folder}; exec >{shlex.quote(out)} 2>{shlex.quote(err)}; "
                f"echo {stamp}; echo {stamp} >&2; cd {shlex.quote(self._workdir)} 2>/dev/null; ")
        text = (head + script).encode()
        arguments: dict[str, Any] = {"path": self._timeout_path, "env": self._env, "capture-output": False,
                                     "arg": ["-k", "2", str(max(1, round(timeout))), self._shell_path, "-s"]}
        if len(text) <= _INLINE_MAX:
            arguments["input-data"] = base64.b64encode(text).decode()
        else:  # too long for one request: the shell reads it from a file instead of its stdin
            self._write(spool, text)
            arguments["arg"] = arguments["arg"][:-1] + [f"{spool}.in"]
        # Before the exec, not after its reply: coreutils' timeout starts counting when the
        # command starts, so a clock started later could read less than TIMEOUT when the kill
        # comes, and a timed-out command would pass for one that exited 124 by itself.
        started = time.monotonic()
        try:
            pid = self._call("guest-exec", **arguments)["pid"]
        except (KeyError, AgentCommandFailed) as exc:
            raise GuestUnreachable(f"the QEMU guest agent did not start the command: {exc}") from exc
        deadline = started + timeout + _KILL_GRACE
        pause = _POLL_FIRST
        status: dict = {}
        try:
            while time.monotonic() < deadline:
                status = self._call("guest-exec-status", pid=pid)
                if status.get("exited"):
                    break
                time.sleep(pause)
                pause = min(_POLL_MAX, pause * 1.5)
        except AgentCommandFailed as exc:
            raise GuestUnreachable(f"the QEMU guest agent lost the command it started: {exc}") from exc
        stdout, stderr = self._output(out, stamp), self._output(err, stamp)
        if "input-data" not in arguments:
            self._empty(f"{spool}.in")
        code = status.get("exitcode")
        if code is None and status.get("signal") is not None:
            code = 128 + int(status["signal"])  # as a shell reports a killed child
        # coreutils timeout exits 124 (or 137 after -k) when it had to stop the script;
        # a script that exits 124 by itself early is not a timeout.
        if not status.get("exited") or code is None or (code in (124, 137) and time.monotonic() - started >= timeout):
            raise CommandTimeout(f"command ran past {timeout:.0f} s in the guest and was killed",
                                 stdout=stdout, stderr=stderr)
        return ExecResult(int(code), stdout, stderr)

    def _take_spool(self) -> str:
        with self._lock:
            if self._free:
                return self._free.pop()
            self._made += 1
            return f"{self._prefix}-{self._made}"

    def _output(self, path: str, stamp: str) -> str:
        """What the command stamped STAMP wrote to PATH; "" when it never got to write there."""
        data = bytearray()
        try:
            for piece in self._chunks(path):
                data += piece
                if len(data) > MAX_OUTPUT_BYTES:
                    raise output_too_large(f"the QEMU guest agent's {path}")
        except AgentCommandFailed:
            return ""  # no command has made it yet
        mine, found, rest = data.partition(stamp.encode() + b"\n")
        return rest.decode(errors="replace") if found and not mine else ""

    def _empty(self, path: str) -> None:
        self._call("guest-file-close", handle=self._call("guest-file-open", path=path, mode="w"))

    def _chunks(self, path: str) -> Iterator[bytes]:
        """PATH in the guest, a read at a time; AgentCommandFailed when it cannot be opened."""
        handle = self._call("guest-file-open", path=path, mode="r")
        try:
            while True:
                piece = self._call("guest-file-read", handle=handle, count=_CHUNK)
                yield base64.b64decode(piece.get("buf-b64", ""))
                if piece.get("eof") or not piece.get("count"):
                    return
        finally:
            self._call("guest-file-close", handle=handle)

    def _write(self, spool: str, data: bytes) -> None:
        """DATA to SPOOL's script file; the spool folder made first if no command has made it yet."""
        try:
            handle = self._call("guest-file-open", path=f"{spool}.in", mode="w")
        except AgentCommandFailed:
            self._run("true", 20, spool)  # its first line makes the folder
            handle = self._call("guest-file-open", path=f"{spool}.in", mode="w")
        self._fill(handle, [data[i:i + _CHUNK] for i in range(0, len(data), _CHUNK)])

    def _fill(self, handle: int, blocks) -> None:
        try:
            for block in blocks:
                chunk: dict[str, Any] = {"handle": handle, "buf-b64": base64.b64encode(block).decode()}
                self._call("guest-file-write", **chunk)
        finally:
            self._call("guest-file-close", handle=handle)

    @override
    def put(self, local: Path, remote: str) -> None:
        try:
            handle = self._call("guest-file-open", path=remote, mode="w")
        except AgentCommandFailed as exc:
            raise FileNotFoundError(f"guest:{remote}: {exc}") from exc
        with local.open("rb") as fh:
            self._fill(handle, iter(lambda: fh.read(_CHUNK), b""))

    @override
    def get(self, remote: str, local: Path) -> None:
        try:
            data = b"".join(self._chunks(remote))
        except AgentCommandFailed as exc:
            raise FileNotFoundError(f"guest:{remote}: {exc}") from exc
        local.write_bytes(data)

    @override
    def close(self) -> None:
        """Nothing to close: each command is its own agent call."""
