"""Overlays with the real qemu-img: writes land in the overlay, never in the backing file."""

import subprocess

from runner.images.catalog import sha256_file
from runner.hypervisor.overlay import backing_file, create_overlay


def qemu_io(image, command):
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", command, str(image)], check=True, capture_output=True)


def reads_as(image, pattern: int, offset: int, length: int) -> bool:
    """Whether qemu-io read LENGTH bytes at OFFSET of IMAGE, every one PATTERN. qemu-io says a
    failed pattern on its output, and may exit 0 when it could not even open the image: both
    its exit code and its own count of what it read must say the read happened."""
    done = subprocess.run(["qemu-io", "-f", "qcow2", "-c", f"read -P {pattern:#x} {offset} {length}", str(image)],
                          capture_output=True, text=True)
    said = done.stdout + done.stderr
    return done.returncode == 0 and f"read {length}/{length} bytes" in said and "Pattern verification failed" not in said


def test_overlay_reads_through_and_keeps_writes_to_itself(tmp_path):
    golden = tmp_path / "golden.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(golden), "16M"], check=True)
    qemu_io(golden, "write -P 0xab 0 64k")
    golden.chmod(0o444)
    before = sha256_file(golden)

    overlay = create_overlay(golden, tmp_path / "ep" / "overlay.qcow2")
    assert backing_file(overlay) == golden.resolve()
    qemu_io(overlay, "write -P 0xcd 0 4k")
    assert reads_as(overlay, 0xab, 4096, 61440)  # what the overlay did not write reads through
    assert reads_as(overlay, 0xcd, 0, 4096)
    assert not reads_as(overlay, 0xab, 0, 4096)  # and the check can fail
    assert sha256_file(golden) == before


def test_two_overlays_of_one_golden_do_not_see_each_other(tmp_path):
    golden = tmp_path / "golden.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(golden), "16M"], check=True)
    a = create_overlay(golden, tmp_path / "a.qcow2")
    b = create_overlay(golden, tmp_path / "b.qcow2")
    qemu_io(a, "write -P 0x11 0 4k")
    assert reads_as(b, 0x00, 0, 4096) and reads_as(a, 0x11, 0, 4096)


def test_standalone_image_has_no_backing_file(tmp_path):
    image = tmp_path / "plain.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(image), "1M"], check=True)
    assert backing_file(image) is None


def test_a_read_of_an_image_that_cannot_be_opened_does_not_pass(tmp_path):
    assert not reads_as(tmp_path / "missing.qcow2", 0x00, 0, 4096)
