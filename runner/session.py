"""The run-scope steps every command that boots a VM shares.

Check the image (catalog entry, golden sha256), connect to libvirt, pick the
accelerator, then hand out an EpisodeVM that is torn down however the block ends.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path

from runner.images.catalog import Catalog, Image
from runner.config import Settings
from runner.episode import EpisodeOptions, EpisodeVM
from runner.episode_domain import episode_domain_spec
from runner.hypervisor.accel import AccelProbe, cached_probe, choose_accel
from runner.hypervisor.domain_xml import Accel, SlotIdentity, build_domain_xml
from runner.hypervisor.libvirt_host import LibvirtHost
from runner.owner import me
from runner.images.start_plan import plan_start

Status = Callable[[str], AbstractContextManager]


def new_run_id() -> str:
    return secrets.token_hex(3)


def resolve_accel(settings: Settings, image: Image | None, requested: str) -> tuple[Accel, AccelProbe]:
    probe = cached_probe(settings.cache_dir, probe_kernel(settings, image))
    return choose_accel(requested, probe), probe


def probe_kernel(settings: Settings, image: Image | None) -> Path | None:
    """A Linux kernel to boot for the KVM probe: the image's own, else linux-test's, else the
    host's. A Windows image has none, and KVM either works for any kernel or for none."""
    candidates = [image] if image is not None else []
    linux = Catalog(settings.images_dir).find("linux-test")
    if linux is not None:
        candidates.append(linux)
    for candidate in candidates:
        if candidate.manifest.boot is not None:
            return candidate.path(candidate.manifest.boot.kernel)
    host_kernels = sorted(Path("/boot").glob("vmlinuz-*"))
    return host_kernels[-1] if host_kernels else None


@contextmanager
def open_vm(
    settings: Settings,
    image_name: str,
    accel: str = "auto",
    *,
    status: Status | None = None,
    notice: Callable[[str], None] | None = None,
    artifacts: Path | None = None,
    run_id: str | None = None,
    start: str = "auto",
) -> Iterator[EpisodeVM]:
    status = status or (lambda _msg: nullcontext())
    image = Catalog(settings.images_dir).get(image_name)
    with status(f"verifying the golden disk of {image_name}"):
        image.verify_disk()
    with status("probing the accelerator"):
        chosen, _probe = resolve_accel(settings, image, accel)
    host = LibvirtHost(settings.libvirt_uri)
    try:
        plan = plan_start(start, host, image, chosen, settings.libvirt_uri, vm_pool=1)
        if plan.notice and notice is not None:
            notice(plan.notice)
        vm = EpisodeVM(host, image, settings, run_id=run_id or new_run_id(), slot=0,
                       options=EpisodeOptions(accel=chosen), artifacts=artifacts, warm=plan.slots.get(0))
        how = "restoring its warm state" if plan.mode == "warm" else "a cold boot under TCG takes ~30-60 s"
        with ExitStack() as stack:
            with status(f"starting {vm.name} under {chosen.upper()} ({how})"):
                vm.start()
            # Started inside the status line; from here on exits as `with vm:` would.
            stack.push(vm)
            yield vm
    finally:
        host.close()


def print_dry_run(settings: Settings, image_name: str, accel: str) -> str:
    """The domain XML an episode of IMAGE_NAME would get, without starting anything."""
    image = Catalog(settings.images_dir).get(image_name)
    chosen, _ = resolve_accel(settings, image, accel)
    identity = SlotIdentity("dryrun", 0)
    spec = episode_domain_spec(image, identity, settings.episodes_dir / identity.name, chosen,
                               shell_port=0, owner=me(), libvirt_uri=settings.libvirt_uri)
    return build_domain_xml(spec)
