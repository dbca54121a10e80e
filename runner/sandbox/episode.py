"""One Inspect sample's episode VM, as the sandbox sees it: commands and files as the desktop user,
the computer tool's actions on the display, and at the end the episode's own scoring.

Plain cu-run (no inspect_ai here): the provider (runner.sandbox.provider) calls it from worker
threads and turns its errors into the ones Inspect's contract names.

The trust model is a cu-run run's. Commands and files go through the desktop user's own SSH
login, so what an Inspect agent does has the user's reach and no more. The task's setup, the
write-set listings, the freeze and the verifier run through the admin channel, which the user
cannot touch (runner.runs.episode_script, shared with `cu-run run`).
"""

from __future__ import annotations

import base64
import errno
import io
import json
import shlex
import stat
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import paramiko

from runner.agents.base import AgentResult
from runner.vm.episode import EpisodeVM
from runner.errors import CommandTimeout, GuestUnreachable, InfraError
from runner.guest.programs import sh_program
from runner.guest.ssh import SshShell
from runner.mcp.trajectory import CURRENT_TOOL, RecordingDisplay, Trajectory
from runner.runs.episode_script import EpisodeScript, Prepared, Scored, episode_fault
from runner.sandbox import computer
from runner.scoring.blame import blame

if TYPE_CHECKING:
    from runner.live.server import LiveServer

NO_TIMEOUT_S = 24 * 3600  # what "no timeout" means to a channel that needs a deadline
# A command for another account goes through the admin channel with its input inside the script.
ADMIN_INPUT_MAX = 8 * 1024 * 1024


class SandboxGone(Exception):
    """The sample's VM cannot be reached (torn down, stopped, or its channel broke)."""


class ReadTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"{size} bytes")
        self.size = size


@dataclass(frozen=True)
class Executed:
    returncode: int
    stdout: str
    stderr: str


class SandboxEpisode:
    """VM, its artifacts in EP_DIR; SCRIPT: the cu-run task it plays (None: a bare desktop)."""

    def __init__(self, vm: EpisodeVM, ep_dir: Path, script: EpisodeScript | None) -> None:
        self.vm = vm
        self.ep_dir = ep_dir
        self.script = script
        self.trajectory = Trajectory(ep_dir)
        self.display = RecordingDisplay(vm.display, self.trajectory)
        self._prepared: Prepared | None = None
        self.scored: Scored | None = None
        self._live: LiveServer | None = None
        self._network = ExitStack()  # the task's network, up from before its setup to the episode's end

    @property
    def home(self) -> str:
        return self.vm.desktop_user.home

    @property
    def user_shell(self) -> SshShell:
        shell = self.vm.shell
        if not isinstance(shell, SshShell):
            raise NotImplementedError(f"image {self.vm.image.name}: the sandbox's commands and files need an SSH "
                                      "guest (linux); a Windows guest is not served yet")
        return shell

    # -- the sample's start and end

    def begin(self) -> None:
        """Before the agent: the computer tool's marker, then the task's setup and its listing."""
        self._admin(sh_program("linux/computer-tool-marker.sh", TOOL_PATH=computer.COMPUTER_TOOL,
                               TOOL_TEXT=computer.COMPUTER_TOOL_STUB), "write the computer tool's marker")
        if self.script is not None:
            self._network.enter_context(self.script.network_up())
            try:
                self._prepared = self.script.prepare()
            except BaseException:
                self._network.close()
                raise
            self.script.agent_begins()
        (self.ep_dir / "initial.png").write_bytes(self.vm.display.screenshot())

    def conclude(self) -> Scored:
        """After the agent: the freeze and the task's verifier, checkpoints, write set and safety
        checks, all through the admin channel. Once: a second call returns the first's."""
        if self.script is None or self._prepared is None:
            raise InfraError("this sandbox plays no cu-run task: its sample's metadata names none (cu_run_task)")
        if self.scored is None:
            try:
                self.script.agent_ended()
                self.scored = self.script.conclude(self._prepared, AgentResult("done"))
            except Exception as exc:  # blamed as a run blames it
                fault = episode_fault(self.vm, exc, self.script.state.stage)
                judged = blame(fault.error, fault.stage, fault.host_fault)
                if judged.outcome != "fail":
                    raise fault.error from exc  # the host's fault: Inspect's sample error (--retry-on-error)
                # The guest ended or broken after the agent acted: the agent's doing, a fail that counts,
                # with the violations the host read alone (as a run's scheduler keeps them).
                self.scored = Scored("fail", judged.reason, AgentResult("done"), {},
                                     violations=self.script.host_violations())
        return self.scored

    def serve_live(self) -> str:
        """The live view of this VM (view only, 127.0.0.1, its own token) until the episode ends;
        returns its URL."""
        from runner.live.server import LiveServer
        from runner.runs.live_sources import SingleVmSource

        self._live = LiveServer(SingleVmSource(self.vm, "inspect sample")).start()
        return self._live.url

    @property
    def live_url(self) -> str | None:
        return self._live.url if self._live is not None else None

    def finish(self) -> None:
        """The sample ended: its live view and network closed, its artifacts kept. The VM stays,
        for whoever gives it back (runner.sandbox.task_vms)."""
        if self._live is not None:
            self._live.close()
        self._network.close()  # its proxy's log is the episode's: it stays in the artifacts
        if self.vm.started:
            self.vm.capture_artifacts(self.ep_dir)

    def close(self, interrupted: bool) -> None:
        """Finishes the episode and removes its VM, however the sample ended."""
        try:
            self.finish()
        finally:
            self.vm.teardown(interrupted=interrupted)

    # -- what the sample's code does in the guest

    def exec(self, argv: list[str], *, stdin: bytes | None, cwd: str | None, env: dict[str, str],
             user: str | None, timeout: int | None) -> Executed:
        """ARGV in the guest, as the desktop user unless USER names another account. Raises
        TimeoutError, PermissionError (not executable), SandboxGone."""
        if not argv:
            raise ValueError("exec needs a command")
        limit = timeout or NO_TIMEOUT_S
        if computer.is_computer_tool(argv) and user in (None, self.vm.desktop_user.name):
            return self._computer(argv[2:])
        workdir = self._path(cwd) if cwd is not None else self.home
        try:
            if user in (None, self.vm.desktop_user.name):
                raw = self.user_shell.exec_argv(argv, stdin=stdin, cwd=workdir, env=env, timeout=limit)
                if raw.timed_out:
                    raise TimeoutError(f"{shlex.join(argv)[:200]} ran past {limit} s and was killed")
                assert raw.exit_code is not None
                done = Executed(raw.exit_code, raw.stdout.decode(errors="replace"), raw.stderr.decode(errors="replace"))
            else:
                done = self._as_account(argv, stdin, workdir, env, user, limit)
        except GuestUnreachable as exc:
            raise SandboxGone(str(exc)) from exc
        if done.returncode == 126 and "ermission denied" in done.stderr:
            raise PermissionError(errno.EACCES, done.stderr.strip(), argv[0])
        return done

    def read_file(self, file: str, limit: int) -> bytes:
        """FILE's bytes, read as the desktop user. Raises FileNotFoundError, PermissionError,
        IsADirectoryError (each naming FILE), ReadTooLarge past LIMIT bytes."""
        path = self._path(file)
        with self._sftp(file) as sftp:
            info = _not_a_folder(sftp, path, file)
            if info is None:
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", file)
            if (info.st_size or 0) > limit:
                raise ReadTooLarge(info.st_size or 0)
            buffer = io.BytesIO()
            try:
                sftp.getfo(path, buffer)
            except OSError as exc:
                raise _path_error(exc, file) from exc
            return buffer.getvalue()

    def write_file(self, file: str, contents: bytes) -> None:
        """FILE written as the desktop user, its folders made. Raises PermissionError,
        IsADirectoryError (each naming FILE)."""
        path = self._path(file)
        with self._sftp(file) as sftp:
            if _not_a_folder(sftp, path, file) is None:
                _make_folders(sftp, str(PurePosixPath(path).parent), file)
            try:
                sftp.putfo(io.BytesIO(contents), path, confirm=False)
            except OSError as exc:
                raise _path_error(exc, file) from exc

    # -- helpers

    def _computer(self, args: list[str]) -> Executed:
        token = CURRENT_TOOL.set("computer")
        try:
            answer = computer.serve(self.display, args)
        except GuestUnreachable as exc:
            raise SandboxGone(str(exc)) from exc
        finally:
            CURRENT_TOOL.reset(token)
        return Executed(0, json.dumps(answer), "")

    def _as_account(self, argv: list[str], stdin: bytes | None, cwd: str, env: dict[str, str], user: str,
                    timeout: int) -> Executed:
        """ARGV as USER (root, or another account) through the admin channel: for the sample's own
        code (its setup and checks), never the agent's, whose tools run as the desktop user."""
        if stdin is not None and len(stdin) > ADMIN_INPUT_MAX:
            raise ValueError(f"input for another account is limited to {ADMIN_INPUT_MAX} bytes")
        script = sh_program("linux/as-account.sh", arguments=[*(f"{k}={v}" for k, v in env.items()), *argv],
                            CU_RUN_CWD=cwd, CU_RUN_ACCOUNT=user, CU_RUN_ENVIRON=len(env),
                            CU_RUN_STDIN="" if stdin is None else base64.b64encode(stdin).decode(),
                            CU_RUN_HAS_STDIN=int(stdin is not None))
        try:
            result = self.vm.admin_shell.run(script, timeout=timeout)
        except CommandTimeout as exc:
            raise TimeoutError(f"{shlex.join(argv)[:200]} ran past {timeout} s and was killed") from exc
        return Executed(result.exit_code, result.stdout, result.stderr)

    def _admin(self, script: str, what: str) -> None:
        result = self.vm.admin_shell.run(script, timeout=60)
        if not result.ok:
            raise InfraError(f"{self.vm.name}: could not {what}: {result.stderr.strip()[-300:]}")

    def _path(self, file: str) -> str:
        """FILE in the guest: relative paths are the desktop user's home's (the sample's folder)."""
        return file if file.startswith("/") else f"{self.home.rstrip('/')}/{file}"

    def _sftp(self, file: str):
        try:
            return self.user_shell.open_sftp()
        except GuestUnreachable as exc:
            raise SandboxGone(f"{file}: {exc}") from exc


def _stat(sftp: paramiko.SFTPClient, path: str, file: str) -> paramiko.SFTPAttributes | None:
    try:
        return sftp.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _path_error(exc, file) from exc


def _not_a_folder(sftp: paramiko.SFTPClient, path: str, file: str) -> paramiko.SFTPAttributes | None:
    """PATH's attributes (None: there is nothing there); IsADirectoryError naming FILE for a folder."""
    info = _stat(sftp, path, file)
    if info is not None and stat.S_ISDIR(info.st_mode or 0):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", file)
    return info


def _make_folders(sftp: paramiko.SFTPClient, folder: str, file: str) -> None:
    missing: list[str] = []
    while folder not in ("", "/") and _stat(sftp, folder, file) is None:
        missing.append(folder)
        folder = str(PurePosixPath(folder).parent)
    for made in reversed(missing):
        try:
            sftp.mkdir(made)
        except OSError as exc:
            raise _path_error(exc, file) from exc


def _path_error(exc: OSError, file: str) -> OSError:
    """EXC as the error Inspect's contract names, with FILE in its message."""
    code = exc.errno or 0
    if code == errno.ENOENT:
        return FileNotFoundError(code, "No such file or directory", file)
    if code in (errno.EACCES, errno.EPERM):
        return PermissionError(code, "Permission denied", file)
    if code == errno.EISDIR:
        return IsADirectoryError(code, "Is a directory", file)
    return OSError(code, f"{exc}", file)
