"""A task's local services: servers the runner starts for an episode and maps a name to, so the
guest reaches them by that name through the proxy (the name leads nowhere else).

A `serve:` service is a folder of the task served read-only over HTTP on 127.0.0.1, a thread of
the runner's: ready once its socket listens, which is before the thread starts.

An `image:` service is a container image the host's engine runs (docker or podman, or the CLI
CU_RUN_CONTAINER_RUNTIME names), its HTTP port published on 127.0.0.1 only, never pulled: an
air-gapped lab loads its images first (`docker load`). It is ready once a GET of its `ready:` path
answers, whatever the status; one that does not within READY_TIMEOUT fails the episode's start
with the container's last log lines. The container is removed when the episode ends.
"""

from __future__ import annotations

import http.client
import os
import secrets
import shutil
import subprocess
import threading
import time
from abc import abstractmethod
from contextlib import AbstractContextManager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

from typing_extensions import override

from runner.errors import InfraError, UsageError
from runner.sockets import free_port

RUNTIME_ENV = "CU_RUN_CONTAINER_RUNTIME"
RUNTIMES = ("docker", "podman")
READY_TIMEOUT = 120.0


class _QuietFolder(SimpleHTTPRequestHandler):
    @override
    def log_message(self, *_args: object) -> None:
        pass


class LocalService(AbstractContextManager["LocalService"]):
    """A server for the episode under NAME, up while the block runs, at ADDRESS on 127.0.0.1."""

    name: str

    @property
    @abstractmethod
    def address(self) -> tuple[str, int]: ...

    @property
    @abstractmethod
    def source(self) -> str:
        """What it serves, for network.json: the folder's name, or the image."""


class FolderService(LocalService):
    """FOLDER served over HTTP on 127.0.0.1 under NAME while the block runs."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name, self.folder = name, folder
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietFolder, directory=str(folder)))
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"service-{name}", daemon=True)

    @property
    @override
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    @override
    def source(self) -> str:
        return self.folder.name

    @override
    def __enter__(self) -> FolderService:
        self._thread.start()
        return self

    @override
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()


def container_runtime() -> str:
    """The container engine's CLI: CU_RUN_CONTAINER_RUNTIME, else docker or podman on PATH.
    UsageError when there is none (checked before any VM starts)."""
    named = os.environ.get(RUNTIME_ENV)
    found = shutil.which(named) if named else next((p for r in RUNTIMES if (p := shutil.which(r))), None)
    if found is None:
        raise UsageError(f"a task's service runs a container image, and this host has no {named or 'docker or podman'}",
                         fix=f"install one (or name its CLI in {RUNTIME_ENV}), or leave the task out")
    return found


class ContainerService(LocalService):
    """IMAGE run by RUNTIME under NAME while the block runs, its PORT published on 127.0.0.1."""

    def __init__(self, name: str, image: str, port: int, ready: str, runtime: str) -> None:
        self.name, self.image, self.port, self.ready, self.runtime = name, image, port, ready, runtime
        self.host_port = free_port()
        self.container = f"cu-run-{name.replace('.', '-')[:40]}-{secrets.token_hex(3)}"

    @property
    @override
    def address(self) -> tuple[str, int]:
        return "127.0.0.1", self.host_port

    @property
    @override
    def source(self) -> str:
        return self.image

    @override
    def __enter__(self) -> ContainerService:
        started = self._engine("run", "--rm", "-d", "--pull", "never", "--name", self.container,
                               "-p", f"127.0.0.1:{self.host_port}:{self.port}", self.image)
        if started.returncode != 0:
            raise InfraError(f"service {self.name}: {self.runtime} could not run {self.image}: "
                             f"{started.stderr.strip()[-800:]}", fix="load the image on this host first (docker load -i FILE)")
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            connection = http.client.HTTPConnection(*self.address, timeout=5)
            try:
                connection.request("GET", self.ready)
                connection.getresponse().read(1)
                return
            except (OSError, http.client.HTTPException):
                time.sleep(0.2)
            finally:
                connection.close()
        logs = self._engine("logs", "--tail", "20", self.container)
        raise InfraError(f"service {self.name}: {self.image} did not answer GET {self.ready} on its port {self.port} "
                         f"within {READY_TIMEOUT:.0f} s; its last lines: {(logs.stdout + logs.stderr).strip()[-800:]}")

    def stop(self) -> None:
        self._engine("rm", "-f", self.container)

    @override
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _engine(self, *args: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([self.runtime, *args], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess([self.runtime, *args], 1, "", str(exc))
