"""What every episode of a run and its pool of slots share: the pool's configuration.

Plain data, built once per run by the run scope (runner.runs.scope) and read by the scheduler
(runner.runs.scheduler) and each episode's script (runner.runs.episode_script).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.benchmarks.host_scoring import HostScoring
from runner.hypervisor.domain_xml import Accel
from runner.images.catalog import Image
from runner.vm.warm_state import WarmSlot
from runner.mcp.proxy import ExternalServer
from runner.mcp.server import DEFAULT_TOOLSETS
from runner.network.settings import NetSettings
from runner.tasks.model import SafetyRule

INFRA_RETRIES = 2


@dataclass(frozen=True)
class PoolConfig:
    image: Image
    accel: Accel
    vm_pool: int
    run_id: str
    infra_retries: int = INFRA_RETRIES
    toolsets: tuple[str, ...] = DEFAULT_TOOLSETS  # what an MCP-driven agent may use
    max_steps: int | None = None
    warm: dict[int, WarmSlot] = field(default_factory=dict)  # pool slot -> its warm state; empty: cold
    spare_warm: tuple[WarmSlot, ...] = ()  # more warm states: restored while a slot's last VM is torn down
    suite_rules: tuple[SafetyRule, ...] = ()  # the suite's safety.yaml
    record: bool = False  # each episode's screen to recording.mp4 (runner.records.recording)
    mcp_server: ExternalServer | None = None  # an external MCP server's tools instead of cu-run's (runner.mcp.proxy)
    standby: bool = True  # with spare warm states: each slot's next VM made ready ahead (runner.runs.standby)
    host_scoring: HostScoring | None = None  # imported tasks: their benchmark's metrics (runner.benchmarks)
    net: NetSettings = NetSettings()  # a networked task's proxy: its mode, cassettes, hosts (runner.runs.episode_network)
