"""The domain an episode of an image gets: one definition for runs, dry runs and warm slots."""

from __future__ import annotations

import os
from pathlib import Path

from runner.images.catalog import Image
from runner.hypervisor.domain_xml import Accel, DirectKernel, DomainSpec, EpisodeTag, PortForward, SlotIdentity, Uefi
from runner.owner import Owner

EPISODE_NVRAM_FILE = "OVMF_VARS.fd"  # each episode's own copy of the UEFI variable store, in its folder


def episode_domain_spec(
    image: Image,
    identity: SlotIdentity,
    workdir: Path,
    accel: Accel,
    shell_port: int,
    owner: Owner,
    libvirt_uri: str,
    memory_mib: int | None = None,
    *,
    run_id: str | None = None,
    vnc_password: str | None = None,
) -> DomainSpec:
    """The domain an episode of IMAGE on slot IDENTITY gets: one definition for runs and dry runs."""
    m = image.manifest
    return DomainSpec(
        identity=identity,
        accel=accel,
        disk=workdir / "overlay.qcow2",
        serial_log=workdir / "serial.log",
        tag=EpisodeTag(run_id or identity.pool, identity.slot, owner.pid, owner.start, workdir),
        boot=DirectKernel(image.path(m.boot.kernel), image.path(m.boot.initrd), m.boot.cmdline) if m.boot else None,
        firmware=Uefi(Path(m.firmware.code), workdir / EPISODE_NVRAM_FILE) if m.firmware else None,
        forwards=(PortForward(shell_port, m.shell_port),),
        memory_mib=memory_mib or m.memory_mib,
        vcpus=m.vcpus,
        run_as=run_as_for(libvirt_uri),
        vnc_password=vnc_password,
        agent_channel=m.qemu_agent,
    )


def run_as_for(uri: str) -> tuple[int, int] | None:
    """Under a local qemu:///system, run QEMU as the caller so its cache folder needs no chown."""
    if uri.startswith("qemu:///system"):
        return os.getuid(), os.getgid()
    return None
