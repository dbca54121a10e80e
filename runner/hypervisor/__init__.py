"""The hypervisor seam: overlays, domain XML, libvirt, the accelerator probe."""
