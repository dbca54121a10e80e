"""runner/hypervisor/qcow2_reader.py against QEMU's own reading of the same images: a
compressed base, an overlay written in places (qemu-io), zero clusters, and the raw bytes
qemu-img converts the chain to."""

import os
import subprocess

import pytest

from runner.hypervisor.qcow2_reader import DiskImage, ImageReadError

MIB = 2**20


def qemu_img(*args):
    subprocess.run(["qemu-img", *args], check=True, capture_output=True)


def qemu_io(image, command):
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", command, str(image)], check=True, capture_output=True)


@pytest.fixture
def chain(tmp_path):
    raw = tmp_path / "base.raw"
    data = bytearray(os.urandom(3 * MIB))
    data[MIB:MIB + 256 * 1024] = bytes(256 * 1024)  # a zero run the compressed base stores small
    raw.write_bytes(bytes(data) + bytes(5 * MIB))  # 8 MiB, its tail unwritten
    base = tmp_path / "base.qcow2"
    qemu_img("convert", "-c", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=65536", str(raw), str(base))
    overlay = tmp_path / "overlay.qcow2"
    qemu_img("create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(overlay))
    qemu_io(overlay, "write -P 0xab 100000 70000")  # across a cluster boundary, not aligned
    qemu_io(overlay, "write -z 2097152 131072")  # zero clusters over the base's data
    qemu_io(overlay, "write -P 0x5c 7340032 4096")  # in the unwritten tail
    expected = tmp_path / "expected.raw"
    qemu_img("convert", "-f", "qcow2", "-O", "raw", str(overlay), str(expected))
    return overlay, expected.read_bytes()


def test_the_chain_reads_as_qemu_reads_it(chain):
    overlay, expected = chain
    with DiskImage(overlay) as disk:
        assert disk.size == len(expected) and disk.backing is not None
        assert disk.read(0, disk.size) == expected
        for offset, length in ((99_999, 70_002), (65_535, 2), (2_097_100, 200), (7_340_000, 5000), (8 * MIB - 10, 10)):
            assert disk.read(offset, length) == expected[offset:offset + length], (offset, length)
        assert disk.read(8 * MIB - 4, 8) == expected[-4:] + bytes(4)  # past the end: zeros


def test_a_raw_image_reads_as_itself(tmp_path):
    raw = tmp_path / "disk.raw"
    raw.write_bytes(b"abc" * 1000)
    with DiskImage(raw) as disk:
        assert not disk.qcow2 and disk.read(1, 5) == b"bcabc"


def test_a_table_past_the_files_end_is_refused(chain, tmp_path):
    overlay, _ = chain
    broken = tmp_path / "broken.qcow2"
    data = bytearray(overlay.read_bytes())
    data[40:48] = (len(data) + 2**20).to_bytes(8, "big")  # the L1 table's offset, past the end
    broken.write_bytes(bytes(data))
    with pytest.raises(ImageReadError, match="past the file's end"):
        DiskImage(broken)
