"""The Host seam: what an episode needs from the machine its VMs run on.

One implementation today: LibvirtHost, the local libvirt (runner/hypervisor/libvirt_host.py),
which `connect_host` (runner/hypervisor/connect.py) opens for a URI. The contract is written
here once, in cu-run's own terms: a domain is a DomainSpec, which each host renders in its
own format (libvirt's XML). Names are domain names; every error is an InfraError with the
fix, except where a method says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from runner.display.base import Display
from runner.hypervisor.domain_xml import DomainSpec, EpisodeTag


@dataclass(frozen=True)
class DomainInfo:
    name: str
    active: bool
    persistent: bool
    tag: EpisodeTag | None  # None: a cu- domain without our metadata (not ours to judge)


class Host(Protocol):
    uri: str

    def versions(self) -> dict[str, str]:
        """{"libvirt": ..., "hypervisor": ...}: for provenance and a warm state's validity."""

    # -- disks

    def create_overlay(self, backing: Path, overlay: Path) -> Path:
        """A qcow2 at OVERLAY whose reads fall through to BACKING (opened read-only) and whose writes stay in it."""

    # -- domains

    def start(self, spec: DomainSpec) -> None:
        """Creates and boots SPEC as a transient domain: it vanishes when destroyed."""

    def restore(self, ram: Path, spec: DomainSpec) -> None:
        """Restores a saved RAM state into SPEC (same name, UUID and devices as saved; disk,
        ports, file paths and the VNC password may differ), running."""

    def describe(self, spec: DomainSpec) -> str:
        """SPEC as this host defines it (libvirt's domain XML): what a failed episode keeps."""

    def save(self, name: str, ram: Path) -> None:
        """Saves NAME's RAM and device state to RAM (a warm slot); the domain is gone after."""

    def destroy(self, name: str) -> bool:
        """Stops and forgets NAME; True if there was something to remove. Idempotent."""

    def is_running(self, name: str) -> bool:
        """Whether NAME exists and runs."""

    def qemu_stopped(self, name: str) -> bool:
        """Whether NAME's emulator is stopped (a hung guest the host can see)."""

    def stop_cause(self, name: str, wait: float = ...) -> Literal["guest", "host"] | None:
        """Who ended NAME's latest run, once it is not running: "guest" when the guest powered
        itself off or reset, "host" for anything else (destroyed, QEMU killed or crashed); None
        when the host cannot tell within WAIT seconds."""

    def cu_domains(self) -> list[DomainInfo]:
        """Every domain of cu-run's on this host, with its episode tag: what gc judges."""

    # -- reaching a VM

    def vnc_endpoint(self, name: str) -> tuple[str, int]:
        """Where NAME's VNC server listens, as (address, port)."""

    def forward_address(self) -> str:
        """The address the guest's forwarded ports (SSH, WinRM) are bound to."""

    def free_port(self) -> int:
        """A port on forward_address() that nothing listens on now."""

    def add_forward(self, name: str, host_port: int, guest_port: int) -> None:
        """Forwards forward_address():HOST_PORT to NAME's GUEST_PORT from now on, a running domain's
        user-mode network changed in place (a networked episode's carriers: runner.network)."""
        raise NotImplementedError(f"{type(self).__name__} cannot add a forward to a running domain")

    def open_display(self, name: str, *, password: str, pointer_offset: int = 0, fast_capture: bool = True) -> Display:
        """NAME's screen, mouse and keyboard (VNC with PASSWORD). FAST_CAPTURE: screenshots through
        the host's own capture path instead of a VNC frame."""

    def screenshot(self, name: str) -> tuple[str, bytes]:
        """NAME's screen: (mime type, image bytes), faster than a VNC frame."""

    def agent_command(self, name: str, command: dict[str, object], timeout: float) -> object:
        """Sends COMMAND ({"execute": ..., "arguments": ...}) to NAME's QEMU guest agent and returns
        its answer's "return" value. Raises GuestUnreachable when the agent does not answer (not
        connected yet, or gone) and runner.guest.qga.AgentCommandFailed when it answers an error."""

    def close(self) -> None:
        """Releases the connection. Idempotent."""
