"""FakeQemuAgent: the QEMU guest agent's commands, carried out on this host.

It is the narrowest seam under QemuAgentShell: the AgentLink. guest-exec starts a real
process here (so `timeout`, `sh`, signals and background children behave as they do in a
guest), guest-file-* act on this host's files. It answers as qemu-ga 7.2 does, JSON-shaped, and
holds the shell to libvirt's limits: a request or a reply is one RPC string of at most
4 MiB (and a reply over 10 MiB costs the real agent's connection for good).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading

from runner.errors import GuestUnreachable
from runner.guest.qga import AgentCommandFailed

LIBVIRT_MAX_STRING = 4 * 2**20


class FakeQemuAgent:
    def __init__(self, *, unreachable_pings: int = 0) -> None:
        self.unreachable_pings = unreachable_pings  # answers "not connected" this many times first
        self.calls: list[str] = []
        self.largest_reply = self.largest_request = 0
        self._processes: dict[int, subprocess.Popen] = {}
        self._files: dict[int, object] = {}
        self._next_handle = 1000
        self._lock = threading.Lock()

    def __call__(self, command: dict, timeout: float) -> object:
        execute, arguments = command["execute"], command.get("arguments", {})
        request = len(json.dumps(command))
        with self._lock:
            self.calls.append(execute)
            self.largest_request = max(self.largest_request, request)
        if request > LIBVIRT_MAX_STRING:
            raise GuestUnreachable(f"string length {request} too large: libvirt's RPC carries at most "
                                   f"{LIBVIRT_MAX_STRING}")
        answer = getattr(self, "_" + execute.replace("-", "_"))(**arguments)
        size = len(json.dumps({"return": answer}))
        self.largest_reply = max(self.largest_reply, size)
        if size > LIBVIRT_MAX_STRING:
            raise GuestUnreachable(f"No complete agent response found in {size} bytes")
        return answer

    def _guest_ping(self) -> dict:
        if self.unreachable_pings > 0:
            self.unreachable_pings -= 1
            raise GuestUnreachable("Guest agent is not responding: QEMU guest agent is not connected")
        return {}

    def _guest_exec(self, path: str, arg: list[str] = (), env: list[str] | None = None,
                    **options) -> dict:
        if options.get("capture-output"):
            raise AssertionError("the fake does not capture output: the shell must not ask for it")
        stdin = base64.b64decode(options.get("input-data", ""))
        environment = dict(e.split("=", 1) for e in env) if env is not None else None
        try:
            process = subprocess.Popen([path, *arg], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, env=environment, cwd="/")
        except OSError as exc:
            raise AgentCommandFailed(f"Guest agent command failed, error was 'Failed to execute child process "
                                     f"“{path}” ({exc.strerror})'") from exc
        threading.Thread(target=self._feed, args=(process, stdin), daemon=True).start()
        with self._lock:
            self._processes[process.pid] = process
        return {"pid": process.pid}

    @staticmethod
    def _feed(process: subprocess.Popen, data: bytes) -> None:
        try:
            process.stdin.write(data)
            process.stdin.close()
        except OSError:
            pass

    def _guest_exec_status(self, pid: int) -> dict:
        with self._lock:
            process = self._processes.get(pid)
        if process is None:
            raise AgentCommandFailed("Invalid parameter 'pid'")
        code = process.poll()
        if code is None:
            return {"exited": False}
        with self._lock:
            del self._processes[pid]
        return {"exited": True, "signal": -code} if code < 0 else {"exited": True, "exitcode": code}

    def _guest_file_open(self, path: str, mode: str = "r") -> int:
        try:
            handle_file = open(path, mode + "b")
        except OSError as exc:
            raise AgentCommandFailed(f"failed to open file '{path}' (mode: '{mode}'): {exc.strerror}") from exc
        with self._lock:
            self._next_handle += 1
            self._files[self._next_handle] = handle_file
            return self._next_handle

    def _guest_file_read(self, handle: int, count: int = 4096) -> dict:
        data = self._files[handle].read(count)
        return {"count": len(data), "buf-b64": base64.b64encode(data).decode(), "eof": len(data) < count}

    def _guest_file_write(self, handle: int, **options) -> dict:
        data = base64.b64decode(options["buf-b64"])
        self._files[handle].write(data)
        return {"count": len(data), "eof": False}

    def _guest_file_close(self, handle: int) -> dict:
        with self._lock:
            self._files.pop(handle).close()
        return {}

    def running(self) -> int:
        """Processes started and not yet reported exited."""
        with self._lock:
            return sum(1 for p in self._processes.values() if p.poll() is None)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
