"""Admission control: how many VMs of an image this host can hold, so a pool is sized before it
starts instead of by the OOM killer halfway through.

A VM costs its guest memory (a guest may touch all of it), QEMU's TCG translation cache
(with TCG), and QEMU's own overhead. The estimate is deliberately the worst case: measured
idle linux-test VMs take 0.45-0.68 GB of a 1.4 GB budget (docs/performance.md). The host's
MemAvailable, less a reserve for the runner and the system, is what is there to spend.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from runner.hypervisor.domain_xml import DomainSpec

QEMU_OVERHEAD_MIB = 128  # QEMU's own heap, device model and buffers beside the guest's RAM
HOST_RESERVE_MIB = 1024  # left for the runner, libvirt, the agents' processes and the system


@dataclass(frozen=True)
class Admission:
    asked: int
    admitted: int
    per_vm_mib: int
    available_mib: int

    @property
    def capped(self) -> bool:
        return self.admitted < self.asked

    @property
    def room_beside(self) -> int:
        """VMs the host could hold beyond the admitted pool: for spare and standby VMs."""
        return max(0, _fitting(self.per_vm_mib, self.available_mib) - self.admitted)

    def notice(self, image: str) -> str:
        return (f"--vm-pool {self.asked} capped at {self.admitted}: a {image} VM may need {self.per_vm_mib} MiB and "
                f"this host has {self.available_mib} MiB available (less {HOST_RESERVE_MIB} MiB kept for the system)")


def per_vm_mib(memory_mib: int, accel: str) -> int:
    """The most host memory one VM of MEMORY_MIB may take under ACCEL."""
    tb_cache = int(DomainSpec.__dataclass_fields__["tb_cache_mib"].default) if accel == "tcg" else 0  # type: ignore[arg-type]
    return memory_mib + tb_cache + QEMU_OVERHEAD_MIB


def available_mib(meminfo: Path = Path("/proc/meminfo")) -> int:
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise ValueError(f"{meminfo} has no MemAvailable line")


def vms_that_fit(memory_mib: int, accel: str, available: int) -> int:
    return _fitting(per_vm_mib(memory_mib, accel), available)


def _fitting(per_vm: int, available: int) -> int:
    """VMs of PER_VM MiB each that AVAILABLE MiB holds, less the host's reserve."""
    return max(0, (available - HOST_RESERVE_MIB) // per_vm)


def admit(asked: int, memory_mib: int, accel: str, available: int) -> Admission:
    """ASKED VMs, or as many as fit; at least one (a single VM is the user's call to make)."""
    fit = vms_that_fit(memory_mib, accel, available)
    return Admission(asked, max(1, min(asked, fit)), per_vm_mib(memory_mib, accel), available)
