"""Domain specs shared by the domain XML tests (golden files) and the e2e check that libvirt accepts them."""

from pathlib import Path

from runner.hypervisor.domain_xml import DirectKernel, DomainSpec, EpisodeTag, PortForward, SlotIdentity, Uefi


def spec(**overrides) -> DomainSpec:
    base = dict(
        identity=SlotIdentity("r1a2b3", 0),
        accel="tcg",
        disk=Path("/cache/episodes/cu-r1a2b3-0/overlay.qcow2"),
        serial_log=Path("/cache/episodes/cu-r1a2b3-0/serial.log"),
        tag=EpisodeTag("r1a2b3", 0, 4242, 987654, Path("/cache/episodes/cu-r1a2b3-0")),
        boot=DirectKernel(Path("/cache/images/linux-test/vmlinuz"), Path("/cache/images/linux-test/initrd.img"),
                          "root=/dev/vda rw console=ttyS0,115200"),
        forwards=(PortForward(40022, 22),),
        run_as=(0, 0),
    )
    base.update(overrides)
    return DomainSpec(**base)



def windows_spec(**overrides) -> DomainSpec:
    workdir = Path("/cache/episodes/cu-r1a2b3-0")
    return spec(boot=None, firmware=Uefi(Path("/usr/share/OVMF/OVMF_CODE_4M.fd"), workdir / "OVMF_VARS.fd"),
                forwards=(PortForward(45985, 5985),), memory_mib=4096, vcpus=2, **overrides)
