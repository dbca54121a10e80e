"""The `cu-run` inspect_ai sandbox: `sandbox=("cu-run", "linux-test")` in any Inspect task.

Each sample gets its own episode VM, restored from a warm RAM state (or booted cold), on a
copy-on-write overlay that is thrown away at the sample's end. Inspect's exec, read_file and
write_file act as the guest's desktop user; its computer() tool is served from the VM's VNC
display (runner.sandbox.computer). A sample whose metadata names a cu-run task gets that task's
setup before its solver starts, and cu_run's scorer scores it as `cu-run run` does
(runner.sandbox.suite). Registered through the `inspect_ai` entry point (cu_run._registry).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal, overload

import anyio
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxConnection,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    sandboxenv,
)
from inspect_ai.util._sandbox.environment import HostMapping, PortMapping, SandboxUnavailableError
from pydantic import BaseModel
from typing_extensions import override

from runner.config import Settings
from runner.errors import UsageError
from runner.images.catalog import Catalog
from runner.vm.admission import available_mib, vms_that_fit
from runner.sandbox.episode import ReadTooLarge, SandboxEpisode, SandboxGone
from runner.sandbox.task_vms import CuRunSandboxConfig, TaskVMs

log = logging.getLogger("cu_run.sandbox")


class CuRunConnection(SandboxConnection):
    """How to reach a sample's VM: SandboxConnection's shell command, and the screen."""

    vnc: str  # HOST:PORT
    vnc_password: str
    live_view: str | None = None


class _Tasks:
    """The open TaskVMs of this process, by task and configuration, with each one's slot limiter."""

    def __init__(self) -> None:
        self.vms: dict[tuple[str, CuRunSandboxConfig], TaskVMs] = {}
        self.limits: dict[tuple[str, CuRunSandboxConfig], anyio.Semaphore] = {}
        self.told_waiting: set[tuple[str, CuRunSandboxConfig]] = set()

    async def open(self, task_name: str, options: CuRunSandboxConfig) -> tuple[TaskVMs, anyio.Semaphore]:
        key = (task_name, options)
        if key not in self.vms:
            vms = await anyio.to_thread.run_sync(lambda: TaskVMs.open(options, _notice))
            if key in self.vms:  # another sample opened it meanwhile
                vms.close()
            else:
                self.vms[key], self.limits[key] = vms, anyio.Semaphore(vms.slots)
        return self.vms[key], self.limits[key]


_TASKS = _Tasks()


def _notice(line: str) -> None:
    log.warning("cu-run: %s", line)


def _options(config: SandboxEnvironmentConfigType | None) -> CuRunSandboxConfig:
    if config is None:
        return CuRunSandboxConfig()
    if isinstance(config, str):
        # Inspect resolves a string against the task file's folder, as it would a compose file: a
        # file there is a configuration (YAML or JSON), anything else names an image.
        path = Path(config)
        if path.is_file():
            return _config_file(path)
        return CuRunSandboxConfig(image=path.name)
    if isinstance(config, CuRunSandboxConfig):
        return config
    raise ValueError(f"the cu-run sandbox takes an image name or a CuRunSandboxConfig, not {type(config).__name__}")


def _config_file(path: Path) -> CuRunSandboxConfig:
    import yaml
    from pydantic import ValidationError

    try:
        data = yaml.safe_load(path.read_text()) or {}
        # The network's files are the configuration's, as a task's are its folder's: relative to it.
        for key in ("assets", "net_hosts"):
            if isinstance(data, dict) and isinstance(data.get(key), str):
                data[key] = str(path.parent / data[key])
        return CuRunSandboxConfig(**data)
    except (yaml.YAMLError, TypeError, ValidationError) as exc:
        raise UsageError(f"{path}: not a cu-run sandbox configuration: {exc}",
                         fix="a mapping of image, accel, start, cache_dir, libvirt_uri, artifacts, live, net, "
                             "assets, net_hosts (docs/inspect.md)") from exc


@sandboxenv(name="cu-run")
class CuRunSandbox(SandboxEnvironment):
    """One sample's episode VM."""

    def __init__(self, episode: SandboxEpisode, slot: int, key: tuple[str, CuRunSandboxConfig]) -> None:
        super().__init__()
        self.episode = episode
        self.slot = slot
        self._key = key

    # -- the task's and the sample's life

    @classmethod
    @override
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        return CuRunSandboxConfig(**config)

    @classmethod
    @override
    def default_concurrency(cls) -> int | None:
        """What cu-run's memory admission holds of linux-test VMs here; a task's own image is
        checked again at its start, and samples past its slots wait."""
        try:
            image = Catalog(Settings.resolve().images_dir).find("linux-test")
            return max(1, vms_that_fit(image.manifest.memory_mib, "tcg", available_mib())) if image else None
        except Exception:  # noqa: BLE001 - no catalog yet: Inspect's own default applies
            return None

    @classmethod
    @override
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Checks the image and its warm states, and removes what dead runs left behind."""
        options = _options(config)
        vms, _limit = await _TASKS.open(task_name, options)
        await anyio.to_thread.run_sync(lambda: _sweep(vms))

    @classmethod
    @override
    async def sample_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                          metadata: dict[str, str]) -> dict[str, SandboxEnvironment]:
        key = (task_name, _options(config))
        vms, limit = await _TASKS.open(*key)
        if limit.value == 0 and key not in _TASKS.told_waiting:
            _TASKS.told_waiting.add(key)
            _notice(f"{task_name}: all {vms.slots} VMs this host's memory holds of {vms.options.image} are busy; "
                    "further samples wait for one (cu-run's admission caps --max-sandboxes)")
        await limit.acquire()
        try:
            episode, slot = await anyio.to_thread.run_sync(lambda: vms.start_episode(dict(metadata), _notice))
        except BaseException:
            limit.release()
            raise
        return {"default": cls(episode, slot, key)}

    @classmethod
    @override
    async def sample_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None,
                             environments: dict[str, SandboxEnvironment], interrupted: bool) -> None:
        for env in environments.values():
            if isinstance(env, CuRunSandbox):
                await env._close(interrupted)

    @classmethod
    @override
    async def task_cleanup(cls, task_name: str, config: SandboxEnvironmentConfigType | None, cleanup: bool) -> None:
        key = (task_name, _options(config))
        vms = _TASKS.vms.pop(key, None)
        _TASKS.limits.pop(key, None)
        if vms is not None and cleanup:
            await anyio.to_thread.run_sync(lambda: _sweep(vms))
            await anyio.to_thread.run_sync(vms.close)
        elif vms is not None:
            _notice(f"{task_name}: VMs kept (--no-sandbox-cleanup); `cu-run gc --everything` removes them")

    @classmethod
    @override
    async def cli_cleanup(cls, id: str | None) -> None:
        """`inspect sandbox cleanup cu-run`: what dead runs left behind (`cu-run gc` does the same)."""
        from runner.vm.gc import collect_garbage
        from runner.hypervisor.connect import connect_host

        settings = Settings.resolve()
        host = connect_host(settings.libvirt_uri)
        try:
            report = await anyio.to_thread.run_sync(lambda: collect_garbage(host, settings))
        finally:
            host.close()
        for line in report.removed:
            print(f"removed {line}")

    async def _close(self, interrupted: bool) -> None:
        vms, limit = _TASKS.vms.get(self._key), _TASKS.limits.get(self._key)
        try:
            with anyio.CancelScope(shield=True):  # torn down even when the sample was cancelled
                if vms is not None:
                    await anyio.to_thread.run_sync(lambda: vms.end_episode(self.slot, interrupted))
                else:
                    await anyio.to_thread.run_sync(lambda: self.episode.close(interrupted))
        finally:
            if limit is not None:
                limit.release()

    # -- commands and files

    @override
    async def exec(self, cmd: list[str], input: str | bytes | None = None, cwd: str | None = None,
                   env: dict[str, str] | None = None, user: str | None = None, timeout: int | None = None,
                   timeout_retry: bool = True, concurrency: bool = True) -> ExecResult[str]:
        stdin = input.encode() if isinstance(input, str) else input
        try:
            done = await anyio.to_thread.run_sync(lambda: self.episode.exec(
                list(cmd), stdin=stdin, cwd=cwd, env=dict(env or {}), user=user, timeout=timeout))
        except SandboxGone as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        # Past the limit only the trailing part is kept, as the contract allows.
        stdout, stderr = done.stdout[-limit:], done.stderr[-limit:]
        return ExecResult(success=done.returncode == 0, returncode=done.returncode, stdout=stdout, stderr=stderr)

    @override
    async def write_file(self, file: str, contents: str | bytes) -> None:
        data = contents.encode() if isinstance(contents, str) else contents
        try:
            await anyio.to_thread.run_sync(lambda: self.episode.write_file(file, data))
        except SandboxGone as exc:
            raise SandboxUnavailableError(str(exc)) from exc

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    @override
    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        try:
            data = await anyio.to_thread.run_sync(lambda: self.episode.read_file(file, limit))
        except ReadTooLarge as exc:
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None) from exc
        except SandboxGone as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        return data.decode("utf-8") if text else data

    @override
    async def connection(self, *, user: str | None = None) -> SandboxConnection:
        endpoints = self.episode.vm.endpoints
        if endpoints is None or not self.episode.vm.started:
            raise ConnectionError(f"the VM of this sample ({self.episode.vm.name}) is not running")
        host, port = endpoints.vnc.rsplit(":", 1)
        return CuRunConnection(type="cu-run", command=endpoints.how_to_connect(), container=endpoints.domain,
                               ports=[PortMapping(container_port=5900, protocol="tcp",
                                                  mappings=[HostMapping(host_ip=host, host_port=int(port))])],
                               vnc=endpoints.vnc, vnc_password=endpoints.vnc_password,
                               live_view=self.episode.live_url)


def _sweep(vms: TaskVMs) -> None:
    """Removes the domains and folders of runs whose process is gone (never a live run's)."""
    from runner.vm.gc import collect_garbage

    report = collect_garbage(vms.scope.host, vms.settings)
    for line in report.removed:
        _notice(f"removed {line}, left by a run that is gone")
