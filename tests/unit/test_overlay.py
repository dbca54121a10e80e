"""Overlays with the real qemu-img: writes land in the overlay, never in the backing file."""

import subprocess

from runner.images.catalog import sha256_file
from runner.hypervisor.overlay import backing_file, create_overlay


def qemu_io(image, command):
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", command, str(image)], check=True, capture_output=True)


def test_overlay_reads_through_and_keeps_writes_to_itself(tmp_path):
    golden = tmp_path / "golden.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(golden), "16M"], check=True)
    qemu_io(golden, "write -P 0xab 0 64k")
    golden.chmod(0o444)
    before = sha256_file(golden)

    overlay = create_overlay(golden, tmp_path / "ep" / "overlay.qcow2")
    assert backing_file(overlay) == golden.resolve()
    qemu_io(overlay, "write -P 0xcd 0 4k")
    read = subprocess.run(["qemu-io", "-f", "qcow2", "-c", "read -P 0xab 4k 60k", str(overlay)],
                          capture_output=True, text=True)
    assert "Pattern verification failed" not in read.stdout + read.stderr
    assert sha256_file(golden) == before


def test_two_overlays_of_one_golden_do_not_see_each_other(tmp_path):
    golden = tmp_path / "golden.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(golden), "16M"], check=True)
    a = create_overlay(golden, tmp_path / "a.qcow2")
    b = create_overlay(golden, tmp_path / "b.qcow2")
    qemu_io(a, "write -P 0x11 0 4k")
    out = subprocess.run(["qemu-io", "-f", "qcow2", "-c", "read -P 0x00 0 4k", str(b)], capture_output=True, text=True)
    assert "Pattern verification failed" not in out.stdout + out.stderr


def test_standalone_image_has_no_backing_file(tmp_path):
    image = tmp_path / "plain.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "1M"], check=True)
    assert backing_file(image) is None
