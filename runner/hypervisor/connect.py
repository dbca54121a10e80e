"""Which Host serves a URI: the one place a host backend is chosen (runner/hypervisor/host.py).

Every libvirt URI (qemu:///system, qemu:///session, test:///default) is the local libvirt's.
A new backend is a Host implementation and a line here; nothing that runs VMs names one.
"""

from __future__ import annotations

from runner.hypervisor.host import Host


def connect_host(uri: str) -> Host:
    """The host at URI, connected (an InfraError with the fix when it cannot be reached)."""
    from runner.hypervisor.libvirt_host import LibvirtHost

    return LibvirtHost(uri)
