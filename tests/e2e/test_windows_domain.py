"""The windows profile's domain XML, accepted by the real libvirt and QEMU of this host
(defined with schema validation, then removed): as far as a host without Windows goes."""

import libvirt

from domain_specs import windows_spec

from runner.hypervisor.domain_xml import SlotIdentity, build_domain_xml


def test_libvirt_accepts_the_windows_domain(settings):
    conn = libvirt.open(settings.libvirt_uri)
    try:
        for accel in ("tcg", "kvm"):
            xml = build_domain_xml(windows_spec(identity=SlotIdentity(f"wincheck{accel}", 0), accel=accel))
            dom = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
            try:
                defined = dom.XMLDesc(0)
                assert "<loader readonly='yes' type='pflash'>" in defined and "machine='pc-q35" in defined
            finally:
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
    finally:
        conn.close()
