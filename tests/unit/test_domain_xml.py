"""Domain XML: golden files for the shapes that matter, and the properties each must keep."""

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from runner.hypervisor.domain_xml import (
    CU_NS,
    QEMU_NS,
    PortForward,
    SlotIdentity,
    build_domain_xml,
    parse_episode_tag,
)

from domain_specs import spec, windows_spec

GOLDEN = Path(__file__).parent.parent / "golden"


def check_golden(name: str, xml: str) -> None:
    path = GOLDEN / name
    if os.environ.get("CU_RUN_UPDATE_GOLDEN"):
        path.write_text(xml)
    assert xml == path.read_text(), f"{name} changed; if intended, rerun with CU_RUN_UPDATE_GOLDEN=1 and review the diff"


def test_linux_tcg_domain_matches_golden():
    check_golden("domain-linux-tcg.xml", build_domain_xml(spec()))


def test_linux_kvm_domain_matches_golden():
    check_golden("domain-linux-kvm.xml", build_domain_xml(spec(accel="kvm", run_as=None)))


def test_network_is_restricted_and_forwards_only_to_loopback():
    root = ET.fromstring(build_domain_xml(spec(forwards=(PortForward(40022, 22), PortForward(40023, 8765)))))
    args = [a.get("value") for a in root.iter(f"{{{QEMU_NS}}}arg")]
    netdev = args[args.index("-netdev") + 1]
    assert "restrict=on" in netdev.split(",")
    forwards = [part for part in netdev.split(",") if part.startswith("hostfwd=")]
    assert forwards == ["hostfwd=tcp:127.0.0.1:40022-:22", "hostfwd=tcp:127.0.0.1:40023-:8765"]
    # no libvirt-managed interface that could bridge the guest to a real network
    assert root.find("./devices/interface") is None


def test_vnc_listens_on_loopback_only():
    graphics = ET.fromstring(build_domain_xml(spec())).find("./devices/graphics")
    assert graphics.get("listen") == "127.0.0.1"
    assert [l.get("address") for l in graphics.findall("listen")] == ["127.0.0.1"]


def test_tcg_gets_a_bounded_translation_cache_and_kvm_does_not():
    tcg = ET.fromstring(build_domain_xml(spec()))
    assert tcg.get("type") == "qemu"
    assert tcg.find("./features/tcg/tb-cache").text == "256"
    kvm = ET.fromstring(build_domain_xml(spec(accel="kvm")))
    assert kvm.get("type") == "kvm"
    assert kvm.find("./features/tcg") is None


def test_slot_identity_is_stable_and_distinct_per_slot():
    a, b = SlotIdentity("pool", 0), SlotIdentity("pool", 1)
    assert (a.name, a.uuid, a.mac) == (SlotIdentity("pool", 0).name, SlotIdentity("pool", 0).uuid, SlotIdentity("pool", 0).mac)
    assert a.name == "cu-pool-0"
    assert len({a.uuid, b.uuid}) == 2 and len({a.mac, b.mac}) == 2
    assert a.mac.startswith("52:54:00:")


def test_episode_tag_round_trips_through_metadata():
    root = ET.fromstring(build_domain_xml(spec()))
    episode = root.find(f"./metadata/{{{CU_NS}}}episode")
    tag = parse_episode_tag(ET.tostring(episode, encoding="unicode"))
    assert tag == spec().tag


def test_metadata_without_a_field_is_rejected():
    with pytest.raises(ValueError, match="owner-pid"):
        parse_episode_tag(f'<episode xmlns="{CU_NS}"><run>x</run><slot>0</slot></episode>')


def test_windows_tcg_domain_matches_golden():
    check_golden("domain-windows-tcg.xml", build_domain_xml(windows_spec()))


def test_windows_kvm_domain_matches_golden():
    check_golden("domain-windows-kvm.xml", build_domain_xml(windows_spec(accel="kvm", run_as=None)))


def test_windows_domain_is_uefi_q35_with_its_own_nvram_and_a_usb_tablet():
    root = ET.fromstring(build_domain_xml(windows_spec()))
    assert root.find("./os/type").get("machine") == "q35"
    loader = root.find("./os/loader")
    assert loader.get("type") == "pflash" and loader.get("readonly") == "yes"
    assert root.find("./os/nvram").text == "/cache/episodes/cu-r1a2b3-0/OVMF_VARS.fd"  # per episode, not shared
    assert root.find("./os/kernel") is None
    assert root.find("./devices/input[@type='tablet']").get("bus") == "usb"
    assert root.find("./devices/disk/target").get("bus") == "virtio"
    args = [a.get("value") for a in root.iter(f"{{{QEMU_NS}}}arg")]
    assert "hostfwd=tcp:127.0.0.1:45985-:5985" in args[args.index("-netdev") + 1]
    assert "bus=pcie.0" in args[args.index("-device") + 1]
    assert root.find("./cpu").get("mode") == "maximum"


def test_a_guest_agent_port_only_for_images_that_run_the_agent_its_socket_beside_the_serial_log():
    assert ET.fromstring(build_domain_xml(spec())).find("./devices/channel") is None
    channel = ET.fromstring(build_domain_xml(spec(agent_channel=True))).find("./devices/channel")
    assert channel.get("type") == "unix"
    assert channel.find("target").attrib == {"type": "virtio", "name": "org.qemu.guest_agent.0"}
    assert channel.find("source").attrib == {"mode": "bind", "path": "/cache/episodes/cu-r1a2b3-0/agent.sock"}
    # A socket path must fit in 108 bytes; past that, libvirt picks one in its own folder.
    deep = Path("/cache/" + "d" * 100 + "/serial.log")
    source = ET.fromstring(build_domain_xml(spec(agent_channel=True, serial_log=deep))).find("./devices/channel/source")
    assert source.attrib == {"mode": "bind"}
